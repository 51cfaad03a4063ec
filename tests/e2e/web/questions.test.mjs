// The web chat when a tool needs the user: an MCP server's tool running inline, an MCP server's
// question (an elicitation) answered in a form made from its schema or declined, and a denial
// with a typed reason that reaches the model. test_web.py starts the servers (the MCP ones with
// `--mcp-config` naming tests/support/mcp_server.py over stdio).

import assert from "node:assert/strict";
import { test } from "node:test";
import { api, axe, lastTurn, launch, newSession, openPage, send, shot, waitTurnStatus } from "./support.mjs";

test("an MCP tool runs inline: its call line and its result", async () => {
  const context = await launch();
  try {
    const session = await newSession("MCP add", "mcp_add.json");
    const page = await openPage(context, session.id);
    await send(page, "What is 20 + 22, says the MCP server?");
    await waitTurnStatus(page, "complete");
    const card = lastTurn(page).locator(".block-tool[aria-label='Tool call t__add']");
    assert.equal(await card.getAttribute("data-state"), "done");
    assert.equal((await card.locator(".tool-summary").textContent()).trim(), "a: 20, b: 22");
    await card.locator("summary").click();
    assert.equal((await card.locator(".tool-result .tool-output").textContent()).trim(), "42");
    assert.match(await lastTurn(page).locator(".block-text").last().textContent(), /The MCP server says 42\./);
    await shot(page, "mcp-tool-inline");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("an MCP server's question is a form: answered, then declined", async () => {
  const context = await launch();
  try {
    const session = await newSession("MCP signup", "mcp_signup.json");
    const page = await openPage(context, session.id);
    await send(page, "Sign me up");
    const card = lastTurn(page).locator(".block-tool[aria-label='Tool call t__signup']");
    const form = card.locator("form.elicit-form");
    await form.waitFor();
    await waitTurnStatus(page, "awaiting_client");
    assert.equal(await card.getAttribute("data-state"), "input");
    assert.equal((await form.locator(".elicit-message").textContent()).trim(), "Sign up for the course");
    // One control per property of the schema, of the property's kind; the first has the focus.
    assert.equal(await form.getByLabel("Name *").evaluate((el) => el === document.activeElement), true);
    assert.equal(await form.getByLabel("Age *").getAttribute("type"), "number");
    assert.equal(await form.getByLabel("Newsletter").getAttribute("type"), "checkbox");
    assert.deepEqual(await form.getByLabel("Plan *").locator("option").allTextContents(), ["Choose…", "free", "pro"]);
    // axe-core finds nothing serious in the form (the rest of the page is other tests' business).
    const inForm = (await axe(page)).filter((v) => ["serious", "critical"].includes(v.impact)
      && v.nodes.some((n) => /elicit/.test(n)));
    assert.deepEqual(inForm, []);
    // A required field left empty keeps the form here (the browser says which).
    await form.getByRole("button", { name: "Submit the answer to t__signup" }).click();
    assert.equal(await card.getAttribute("data-state"), "input");
    await form.getByLabel("Name *").fill("Ann");
    await form.getByLabel("Age *").fill("33");
    await form.getByLabel("Newsletter").check();
    await form.getByLabel("Plan *").selectOption({ label: "pro" });
    await shot(page, "mcp-elicitation-form");
    await form.getByRole("button", { name: "Submit the answer to t__signup" }).click();
    await waitTurnStatus(page, "complete");
    assert.equal(await card.getAttribute("data-state"), "done");
    assert.match(await lastTurn(page).locator(".block-text").last().textContent(),
      /Signed up: Ann \(33\) is on the pro plan, with the newsletter/);

    await send(page, "Once more");
    await page.waitForFunction(() => document.querySelectorAll(".turn").length === 2);
    const again = lastTurn(page).locator(".block-tool[aria-label='Tool call t__signup']");
    await again.locator("form.elicit-form").waitFor();
    await again.getByRole("button", { name: "Decline to answer t__signup" }).click();
    await waitTurnStatus(page, "complete");
    const said = await lastTurn(page).locator(".block-text").last().textContent();
    assert.match(said, /^Not signed up: /);
    assert.doesNotMatch(said, /Ann/);
    const stored = await api(`/api/sessions/${session.id}`);
    const result = stored.turns[1].blocks.find((b) => b.type === "tool_result");
    assert.equal(result.is_error, true);
    assert.equal(await again.getAttribute("data-state"), "error");
    await shot(page, "mcp-elicitation-declined");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("an MCP server's request to use the model is allowed in a form without fields", async () => {
  // Issue 27, item 9: sampling under TURNSTREAM_MCP_SAMPLING=ask (the default).
  const context = await launch();
  try {
    const session = await newSession("MCP haiku", "mcp_haiku.json");
    const page = await openPage(context, session.id);
    await send(page, "A poem, please");
    const card = lastTurn(page).locator(".block-tool[aria-label='Tool call o__haiku']");
    const form = card.locator("form.elicit-form");
    await form.waitFor();
    await waitTurnStatus(page, "awaiting_client");
    assert.match(await form.locator(".elicit-message").textContent(),
      /The MCP server 'o' asks to use the model \(sampling, up to 60 tokens\).*Write a haiku about rain\./);
    assert.equal(await form.locator(".elicit-field").count(), 0);
    await shot(page, "mcp-sampling-form");
    const allow = form.getByRole("button", { name: "Submit the answer to o__haiku" });
    assert.equal((await allow.textContent()).trim(), "Allow");
    await allow.click();
    await waitTurnStatus(page, "complete");
    assert.equal(await card.getAttribute("data-state"), "done");
    assert.equal((await card.locator(".tool-model-use").textContent()).trim(), "used the model: 11 tokens in, 9 out");
    assert.match(await lastTurn(page).locator(".block-text").last().textContent(),
      /The poem: .* wrote: rain on the tin roof/);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a denial's typed reason reaches the model", async () => {
  const context = await launch();
  try {
    const session = await newSession("Deny with a reason", "approval.json");
    const page = await openPage(context, session.id);
    await send(page, "Make a scratch cell, then delete it");
    const card = lastTurn(page).locator(".block-tool[aria-label='Tool call delete_cell']");
    const reason = card.getByLabel("Why you deny delete_cell (optional; the assistant reads it)");
    await reason.waitFor();
    await waitTurnStatus(page, "awaiting_client");
    await reason.fill("keep it for the report");
    await shot(page, "deny-with-reason");
    await card.getByRole("button", { name: "Deny delete_cell" }).click();
    await waitTurnStatus(page, "complete");
    assert.equal(await card.getAttribute("data-state"), "denied");
    // The scripted model quotes the result it was sent: the reason is in it.
    assert.match(await lastTurn(page).locator(".block-text").last().textContent(),
      /Outcome of the delete: .*denied.*keep it for the report/s);
    const stored = await api(`/api/sessions/${session.id}`);
    const result = stored.turns[0].blocks.find((b) => b.type === "tool_result" && b.is_error);
    assert.match(result.content, /keep it for the report/);
    const audit = await api(`/api/sessions/${session.id}/audit`);
    const run = audit.tool_runs.find((r) => r.tool === "delete_cell");
    assert.equal(run.decision.reason, "keep it for the report");
    assert.equal(await page.locator(".cell").count(), 1, "the cell was not deleted");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
