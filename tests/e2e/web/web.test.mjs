// Browser tests of the web chat against a running `turnstream serve` (see support.mjs).
//
// Debian's Chromium is driven through playwright-core; every test gets a fresh profile. Nothing
// here waits for a fixed time: each step waits for something visible on the page.

import assert from "node:assert/strict";
import { test } from "node:test";
import {
  BASE, KEY, api, blockOrder, launch, lastTurn, newSession, openPage, send, shot, TURN_TIMEOUT, waitTurnStatus,
} from "./support.mjs";

test("the page takes the key from the address, hides it and says it runs the offline demo", async () => {
  const context = await launch();
  try {
    const page = await openPage(context);
    assert.ok(!page.url().includes("key="), `the key must leave the address bar: ${page.url()}`);
    const stored = await page.evaluate(() => localStorage.getItem("turnstream.key"));
    assert.equal(stored, KEY);
    await page.waitForSelector("#demo-banner:not([hidden])");
    const banner = await page.textContent("#demo-banner");
    assert.match(banner, /offline demo/i);
    assert.match(banner, /scripted:notebook-demo/);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("without a key the page asks for one, and the key typed in works", async () => {
  const context = await launch();
  try {
    const page = await context.newPage();
    await page.goto(`${BASE}/`);
    await page.waitForSelector("#login-dialog[open]");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "login-key");
    await page.keyboard.type("not-a-key");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => /not accepted/.test(document.querySelector("#login-message").textContent));
    await page.fill("#login-key", KEY);
    await page.keyboard.press("Enter");
    await page.waitForSelector("body[data-ready='true']");
    assert.equal(await page.locator("#login-dialog[open]").count(), 0);
  } finally {
    await context.close();
  }
});

test("demo conversation: cells are created and run, a table and a Plotly chart show, tool calls render inline before the final text", async () => {
  const context = await launch();
  try {
    const session = await newSession("Demo analysis");
    const page = await openPage(context, session.id);
    // Record every state the tool cards' inputs pass through, to see them stream.
    await page.evaluate(() => {
      window.inputStates = [];
      new MutationObserver(() => {
        for (const card of document.querySelectorAll(".block-tool")) {
          const text = card.querySelector(".tool-input")?.textContent ?? "";
          window.inputStates.push({ index: card.dataset.index, state: card.dataset.state, len: text.length });
        }
      }).observe(document.querySelector("#chat-log"), { subtree: true, childList: true, characterData: true });
    });
    await send(page, "Create an example notebook with some data analysis");

    // While it streams: the first tool call shows before the turn ends.
    await page.waitForSelector(".turn:last-of-type .block-tool[aria-label='Tool call get_notebook_state']");
    await waitTurnStatus(page, "complete");

    // The notebook: three cells, all run successfully, with a table and a chart.
    await page.waitForFunction(() => document.querySelectorAll(".cell[data-status='success']").length === 3);
    await page.waitForSelector(".cell .out-table table");
    await page.waitForSelector(".cell .out-plotly.rendered .js-plotly-plot", { timeout: 30_000 });
    const tableRows = await page.locator(".cell .out-table table tbody tr").count();
    assert.ok(tableRows >= 4, `expected table rows, got ${tableRows}`);
    const badges = await page.locator(".cell .badge").allTextContents();
    assert.deepEqual(badges, ["success", "success", "success"]);

    // The chat: blocks in stream order, tools inline between texts, the final text last.
    const order = await blockOrder(page);
    const kinds = order.map((b) => b.kind);
    const indexes = order.map((b) => b.index);
    assert.deepEqual([...indexes].sort((a, b) => a - b), indexes, "blocks are in index order");
    assert.equal(new Set(indexes).size, indexes.length, "no block shows twice");
    assert.equal(kinds[0], "block-thinking");
    const toolNames = order.filter((b) => b.kind === "block-tool").map((b) => b.name);
    assert.deepEqual(toolNames, ["get_notebook_state", "create_cell", "run_cell", "create_cell", "run_cell",
      "create_cell", "run_cell"]);
    assert.equal(kinds.at(-1), "block-text", "the final answer is the last block");
    assert.match(order.at(-1).text, /^Done\./);
    const firstTool = kinds.indexOf("block-tool");
    const lastTool = kinds.lastIndexOf("block-tool");
    assert.ok(kinds.slice(0, firstTool).includes("block-text"), "text before the first tool call");
    assert.ok(kinds.slice(firstTool, lastTool).includes("block-text"), "text between the tool calls");
    // Every call shows its input and, beneath it, its result.
    const tools = lastTurn(page).locator(".block-tool");
    for (let i = 0; i < (await tools.count()); i += 1) {
      const tool = tools.nth(i);
      assert.equal(await tool.getAttribute("data-state"), "done");
      assert.ok((await tool.locator(".tool-input").textContent()).length > 0);
      assert.ok(await tool.locator(".tool-result .tool-output").count(), "result under the call");
    }
    // Tool inputs streamed: the first create_cell's input was shown at several lengths
    // while the card was still being written.
    const createIndex = String(order.find((b) => b.name === "create_cell").index);
    const states = await page.evaluate(() => window.inputStates);
    const partial = new Set(states.filter((x) => x.index === createIndex && x.state === "streaming").map((x) => x.len));
    assert.ok(partial.size >= 3, `create_cell input should stream in pieces, saw lengths ${[...partial]}`);
    // Thinking is there, collapsed.
    const thinking = lastTurn(page).locator("details.block-thinking");
    assert.equal(await thinking.count(), 1);
    assert.equal(await thinking.evaluate((d) => d.open), false);
    // The final text is rendered Markdown.
    assert.equal(await lastTurn(page).locator(".block-text ol li").count(), 3);
    assert.ok(await lastTurn(page).locator(".block-text strong").count() >= 3);
    await shot(page, "demo-complete");
    await page.locator(".cell .out-plotly").scrollIntoViewIfNeeded();
    await shot(page, "demo-chart");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

async function approvalRun(decision) {
  const context = await launch();
  try {
    const session = await newSession(`Approval (${decision})`, "approval.json");
    const page = await openPage(context, session.id);
    await send(page, "Add a scratch cell, then delete it");
    const card = page.locator(".turn:last-of-type .block-tool[aria-label='Tool call delete_cell']");
    const button = card.getByRole("button", { name: decision === "approve" ? "Approve delete_cell" : "Deny delete_cell" });
    await button.waitFor();
    await waitTurnStatus(page, "awaiting_client");
    assert.equal(await card.getAttribute("data-state"), "approval");
    // The scratch cell exists and ran; keyboard focus waits on the Approve button.
    await page.waitForSelector(".cell[data-status='success']");
    assert.equal(await page.locator(".cell").count(), 1);
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Approve");
    await shot(page, `approval-${decision}-asked`);
    if (decision === "approve") await page.keyboard.press("Enter"); // the focused Approve button
    else await button.click();
    await waitTurnStatus(page, "complete");
    const finalText = await lastTurn(page).locator(".block-text").last().textContent();
    if (decision === "approve") {
      await page.waitForFunction(() => document.querySelectorAll(".cell").length === 0);
      assert.equal(await card.getAttribute("data-state"), "done");
      assert.match(finalText, /"deleted"/);
    } else {
      assert.equal(await card.getAttribute("data-state"), "denied");
      assert.match(await card.locator(".tool-result").textContent(), /denied/i);
      assert.equal(await page.locator(".cell").count(), 1, "a denied delete keeps the cell");
      assert.match(finalText, /denied/i);
    }
    assert.equal(await card.locator(".tool-actions button").count(), 0, "buttons go once decided");
    await shot(page, `approval-${decision}-done`);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
}

test("approving delete_cell deletes the cell", () => approvalRun("approve"));
test("denying delete_cell keeps the cell and tells the model", () => approvalRun("deny"));

test("always allowing a tool in a session stops the questions", async () => {
  const context = await launch();
  try {
    const session = await newSession("Always allow", "always_allow.json");
    const page = await openPage(context, session.id);
    await send(page, "Add a cell, then delete it");
    const first = lastTurn(page).locator(".block-tool[aria-label='Tool call delete_cell']");
    const always = first.getByRole("button", { name: "Always allow delete_cell in this session" });
    await always.waitFor();
    await waitTurnStatus(page, "awaiting_client");
    await shot(page, "always-allow-asked");
    await always.click();
    await waitTurnStatus(page, "complete");
    assert.equal(await first.getAttribute("data-state"), "done");
    assert.match(await lastTurn(page).locator(".block-text").last().textContent(), /First delete: .*deleted/);
    // The next turn deletes without asking: it never waits, and its card has no buttons.
    await send(page, "Once more");
    await page.waitForFunction(() => document.querySelectorAll(".turn").length === 2);
    await waitTurnStatus(page, "complete");
    const second = lastTurn(page).locator(".block-tool[aria-label='Tool call delete_cell']");
    assert.equal(await second.getAttribute("data-state"), "done");
    assert.equal(await second.locator(".tool-actions button").count(), 0);
    assert.equal(await page.locator(".cell").count(), 0, "both cells were deleted");
    const audit = await api(`/api/sessions/${session.id}/audit`);
    const deletes = audit.tool_runs.filter((r) => r.tool === "delete_cell");
    assert.deepEqual(deletes.map((r) => [r.decision.source, r.decision.always]), [["user", true], ["session_grant", false]]);
    assert.deepEqual(audit.grants.map((g) => g.tool), ["delete_cell"]);
    const turns = await api(`/api/sessions/${session.id}`);
    assert.equal(turns.turns[1].status, "complete");
    await shot(page, "always-allow-done");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a client-side tool runs in the browser and its answer reaches the model", async () => {
  const context = await launch();
  try {
    const session = await newSession("Client tool", "client_tool.json");
    const page = await openPage(context, session.id);
    const tz = await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone);
    await send(page, "What time is it for me?");
    await waitTurnStatus(page, "complete");
    const card = lastTurn(page).locator(".block-tool[aria-label='Tool call get_browser_time']");
    assert.equal(await card.getAttribute("data-state"), "done");
    assert.match(await card.locator(".tool-output").textContent(), new RegExp(`time zone\\s*${tz}`));
    const finalText = await lastTurn(page).locator(".block-text").last().textContent();
    assert.equal(finalText.trim(), `Your browser's time zone is ${tz}.`);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("reloading the page mid-turn resumes the stream without losing or repeating anything", async () => {
  const context = await launch();
  try {
    const session = await newSession("Reload mid-turn", "slow.json");
    await context.addInitScript(recordAnswerTexts);
    const page = await openPage(context, session.id);
    await send(page, "Tell me something long");
    // Reload once the slow answer has started streaming.
    const streaming = page.locator(".turn:last-of-type .block-text.streaming");
    await page.waitForSelector(".turn:last-of-type .block-tool[data-state='done']");
    await streaming.waitFor();
    await page.waitForFunction(() => {
      const t = document.querySelector(".turn:last-of-type .block-text.streaming");
      return t && t.textContent.includes("Sentence number 2");
    });
    const before = await streaming.textContent();
    assert.ok(!before.includes("THE END."), "the reload must happen mid-turn");
    await page.reload();
    await page.waitForSelector("body[data-ready='true']");
    await page.waitForSelector(`body[data-session-id='${session.id}']`);
    // The turn is still running after the reload and the page follows it.
    const sawRunning = await page.locator(".turn:last-of-type").getAttribute("data-status");
    assert.ok(["running", "complete"].includes(sawRunning));
    await waitTurnStatus(page, "complete");
    const order = await blockOrder(page);
    assert.deepEqual(order.map((b) => b.kind), ["block-text", "block-tool", "block-text"]);
    assert.deepEqual(order.map((b) => b.index), [0, 1, 3], "text, call (result inside it), answer");
    const answer = await lastTurn(page).locator(".block-text").last().textContent();
    const stored = await api(`/api/sessions/${session.id}`);
    const storedText = stored.turns.at(-1).blocks.at(-1).text;
    assert.equal(answer.trim(), storedText.trim(), "the answer shows exactly once, complete");
    assert.equal((answer.match(/Sentence number 1 /g) || []).length, 1);
    assert.ok(answer.trim().endsWith("THE END."));
    await assertOnlyPrefixes(page, answer.trim());
    assert.equal(await page.locator(".turn").count(), 1);
    await shot(page, "reload-resumed");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

// Records every text the answer block (index 3 of slow.json's turn) shows, page after page.
function recordAnswerTexts() {
  const seen = [];
  window.answerTexts = seen;
  const watch = () => {
    const log = document.querySelector("#chat-log");
    if (!log) return;
    new MutationObserver(() => {
      const b = document.querySelector(".turn:last-of-type .block-text[data-index='3'] .md");
      if (b) seen.push(b.textContent);
    }).observe(log, { subtree: true, childList: true, characterData: true });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", watch);
  else watch();
}

// Every text the page showed while streaming is a beginning of the final one: no piece
// out of place, none twice.
async function assertOnlyPrefixes(page, finalText) {
  const seen = await page.evaluate(() => window.answerTexts);
  assert.ok(seen.length > 0);
  for (const t of seen) assert.ok(finalText.startsWith(t.trim()), `shown out of order: ${JSON.stringify(t.slice(-60))}`);
}

// Cuts the page's POST …/turns stream, as a network failure would, once the test sets
// window.dropTurnStream; the page must resume through the events route.
function cutTurnStreams() {
  const realFetch = window.fetch.bind(window);
  window.fetch = async (input, init = {}) => {
    const resp = await realFetch(input, init);
    const url = typeof input === "string" ? input : input.url;
    if ((init.method || "GET") !== "POST" || !/\/turns$/.test(url)) return resp;
    const reader = resp.body.getReader();
    const body = new ReadableStream({
      async pull(ctl) {
        if (window.dropTurnStream) {
          window.dropTurnStream = false;
          reader.cancel();
          ctl.error(new TypeError("network error (cut by the test)"));
          return;
        }
        const { value, done } = await reader.read();
        if (done) ctl.close();
        else ctl.enqueue(value);
      },
    });
    return new Response(body, { status: resp.status, headers: resp.headers });
  };
}

test("a dropped connection is resumed from the last event, without losing or repeating any", async () => {
  const context = await launch();
  try {
    const session = await newSession("Dropped connection", "slow.json");
    await context.addInitScript(cutTurnStreams);
    await context.addInitScript(recordAnswerTexts);
    const page = await openPage(context, session.id);
    const resumes = [];
    page.on("request", (req) => {
      if (req.url().endsWith("/events")) resumes.push(req.headers()["last-event-id"]);
    });
    await send(page, "Tell me something long");
    await page.waitForFunction(() => {
      const t = document.querySelector(".turn:last-of-type .block-text.streaming");
      return t && t.textContent.includes("Sentence number 2");
    });
    await page.evaluate(() => (window.dropTurnStream = true));
    await waitTurnStatus(page, "complete");
    assert.equal(resumes.length, 1, "one resume through the events route");
    assert.match(resumes[0], /^turn_\w+:\d+$/, "with the last event id seen");
    const answer = (await lastTurn(page).locator(".block-text").last().textContent()).trim();
    const stored = await api(`/api/sessions/${session.id}`);
    assert.equal(answer, stored.turns.at(-1).blocks.at(-1).text.trim());
    assert.equal((answer.match(/Sentence number 2 /g) || []).length, 1);
    assert.deepEqual((await blockOrder(page)).map((b) => b.index), [0, 1, 3]);
    await assertOnlyPrefixes(page, answer);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a stream that breaks mid-step is restarted: the partial blocks go and nothing shows twice", async () => {
  const context = await launch();
  try {
    const session = await newSession("Restarted step", "restart.json");
    const page = await openPage(context, session.id);
    await send(page, "Say something");
    await waitTurnStatus(page, "complete");
    const texts = await lastTurn(page).locator(".block-text").allTextContents();
    assert.deepEqual(texts.map((t) => t.trim()), ["This answer breaks off once, then arrives whole and only once."]);
    assert.match(await lastTurn(page).locator(".block-note").textContent(), /retrying step 1/);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a provider error shows in place, after the blocks the turn already had", async () => {
  const context = await launch();
  try {
    const session = await newSession("Provider error", "error.json");
    const page = await openPage(context, session.id);
    await send(page, "Try something");
    await waitTurnStatus(page, "failed");
    const order = await blockOrder(page);
    assert.deepEqual(order.map((b) => b.kind), ["block-text", "block-tool", "block-error"]);
    assert.match(await lastTurn(page).locator(".block-error").textContent(), /refuses this request/);
    assert.match(await lastTurn(page).locator(".turn-footer").textContent(), /failed/);
    // The session takes the next message.
    assert.equal(await page.locator("#send").isDisabled(), false);
    // After a reload the stored turn shows the error in the same place.
    await page.reload();
    await page.waitForSelector(`body[data-session-id='${session.id}']`);
    await waitTurnStatus(page, "failed");
    const again = await blockOrder(page);
    assert.deepEqual(again.map((b) => b.kind), ["block-text", "block-tool", "block-error"]);
    assert.match(await lastTurn(page).locator(".block-error").textContent(), /refuses this request/);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("the stop button cancels a running turn", async () => {
  const context = await launch();
  try {
    const session = await newSession("Stopped", "slow.json");
    const page = await openPage(context, session.id);
    await send(page, "Tell me something long");
    await page.waitForSelector(".turn:last-of-type .block-text.streaming");
    await page.waitForSelector("#stop:not([hidden])");
    await page.click("#stop");
    await waitTurnStatus(page, "cancelled");
    await page.waitForSelector("#stop", { state: "hidden" });
    const stored = await api(`/api/sessions/${session.id}`);
    assert.equal(stored.turns.at(-1).status, "cancelled");
    const answer = await lastTurn(page).locator(".block-text").last().textContent();
    assert.ok(!answer.includes("THE END."), "stopped before the end");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a second tab sees the notebook change live", async () => {
  const context = await launch();
  try {
    const session = await newSession("Two tabs");
    const first = await openPage(context, session.id);
    const second = await openPage(context, session.id);
    await second.waitForSelector("#live-state[data-state='live']");
    await first.bringToFront();
    await send(first, "Create an example notebook with some data analysis");
    // The second tab never sent anything, yet its notebook fills as the first tab's turn runs.
    await second.waitForSelector(".cell[data-status='running'], .cell[data-status='success']");
    await second.waitForFunction(() => document.querySelectorAll(".cell[data-status='success']").length === 3,
      null, { timeout: TURN_TIMEOUT });
    await second.waitForSelector(".cell .out-table table");
    await second.waitForSelector(".cell .out-plotly.rendered .js-plotly-plot", { timeout: 30_000 });
    await waitTurnStatus(first, "complete");
    // Both tabs show the same cells in the same order.
    const ids = (p) => p.locator(".cell").evaluateAll((cells) => cells.map((c) => c.dataset.cellId));
    assert.deepEqual(await ids(second), await ids(first));
    // The second tab also showed the turn itself, live over its WebSocket.
    await waitTurnStatus(second, "complete");
    assert.equal(await lastTurn(second).locator(".msg-user .msg-body").textContent(),
      "Create an example notebook with some data analysis");
    assert.deepEqual((await blockOrder(second)).map((b) => b.kind), (await blockOrder(first)).map((b) => b.kind));
    await shot(second, "second-tab");
    assert.deepEqual(first.errors, []);
    assert.deepEqual(second.errors, []);
  } finally {
    await context.close();
  }
});

test("sessions can be created, switched and deleted from the keyboard", async () => {
  const context = await launch();
  try {
    const page = await openPage(context);
    const dialogs = [];
    page.on("dialog", (d) => {
      dialogs.push(d.type());
      d.dismiss();
    });
    const before = (await api("/api/sessions")).sessions.length;
    const previous = await page.evaluate(() => document.body.dataset.sessionId ?? null);
    await page.focus("#new-session");
    await page.keyboard.press("Enter");
    // A new chat is a draft: the message box is ready, nothing exists on the server yet.
    await page.waitForFunction(() => !document.body.dataset.sessionId && document.activeElement?.id === "message");
    await page.waitForSelector(".session-list li.current.draft");
    assert.equal((await api("/api/sessions")).sessions.length, before);
    await page.keyboard.type("Keyboard chat, first message");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.body.dataset.sessionId);
    const sid = await page.evaluate(() => document.body.dataset.sessionId);
    await waitTurnStatus(page, "complete");
    await page.waitForSelector(`.session-list li.current [data-session-id='${sid}']`);
    // Switch to another chat with the arrow keys and Enter, then back.
    if (previous) {
      await page.focus(`.session-list [data-session-id='${sid}']`);
      await page.keyboard.press("ArrowDown");
      await page.keyboard.press("Enter");
      await page.waitForFunction((id) => document.body.dataset.sessionId !== id, sid);
      await page.click(`.session-list [data-session-id='${sid}']`);
      await page.waitForFunction((id) => document.body.dataset.sessionId === id, sid);
    }
    // Delete from the keyboard, through the page's own dialog (Cancel has the focus).
    await page.focus(".session-list li.current .session-delete");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#confirm-dialog[open]");
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Cancel");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Delete");
    await page.keyboard.press("Enter");
    await page.waitForFunction((id) => !document.querySelector(`[data-session-id='${id}']`), sid);
    const remaining = await api("/api/sessions");
    assert.ok(!remaining.sessions.some((s) => s.id === sid));
    assert.deepEqual(dialogs, [], "no browser dialog");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

// Run against a server that cannot start a sandbox (test_web.py starts one without bubblewrap).
test("the notebook pane says why no cell can run when there is no sandbox", async () => {
  const context = await launch();
  try {
    const session = await newSession("No sandbox");
    const page = await openPage(context, session.id);
    await page.waitForSelector(".sandbox-warning:not([hidden])");
    const warning = await page.textContent(".sandbox-warning");
    assert.match(warning, /^No notebook cell can run: bubblewrap \(bwrap\)/);
    assert.match(warning, /apt install bubblewrap/);
    await shot(page, "no-sandbox");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a turn at its budget asks to continue, and its footer shows tokens, cache and cost", async () => {
  const context = await launch();
  try {
    const session = await newSession("Budget", "budget.json");
    const page = await openPage(context, session.id);
    await send(page, "What is in the notebook?");
    await waitTurnStatus(page, "awaiting_client");
    const note = lastTurn(page).locator(".block-note").last();
    assert.match(await note.textContent(), /Budget reached: this turn has used 360 tokens of its 300 tokens\. Approve to continue with another 300 tokens/);
    const card = lastTurn(page).locator(".block-tool[data-state='approval']");
    await shot(page, "budget-asked");
    await card.getByRole("button", { name: "Approve get_notebook_state" }).click();
    await waitTurnStatus(page, "complete");
    const footer = await lastTurn(page).locator(".turn-footer").textContent();
    // 3 steps of 100 in / 20 out, 50 read from and 10 written to the cache; priced by TURNSTREAM_PRICES.
    assert.match(footer, /3 steps · 300 in · 60 out tokens · cache 150 read · 30 written · \$0\.0005/);
    await shot(page, "budget-done");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
