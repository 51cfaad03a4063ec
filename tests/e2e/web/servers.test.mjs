// The web chat and MCP servers (issue 27, items 7 and 8): a call's progress on its tool card,
// and a server that did not start said in a banner, in the server's words. test_web.py starts
// the server with `--mcp-config` naming the tests' MCP server (`t`) and one that dies at start.

import assert from "node:assert/strict";
import { test } from "node:test";
import { api, lastTurn, launch, newSession, openPage, send, shot, waitTurnStatus } from "./support.mjs";

test("a call's progress shows on its tool card", async () => {
  const context = await launch();
  try {
    const session = await newSession("MCP count", "mcp_count.json");
    const page = await openPage(context, session.id);
    await send(page, "Count to three.");
    await waitTurnStatus(page, "complete");
    const card = lastTurn(page).locator(".block-tool[aria-label='Tool call t__count']");
    assert.equal(await card.getAttribute("data-state"), "done");
    const bar = card.locator("progress.tool-progress-bar");
    assert.equal(await bar.getAttribute("aria-label"), "Progress of t__count");
    assert.deepEqual(await bar.evaluate((p) => [p.value, p.max]), [3, 3]);
    assert.equal((await card.locator(".tool-progress-text").textContent()).trim(), "3/3 · counted 3");
    await shot(page, "mcp-tool-progress");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("an MCP server that did not start is said on the page", async () => {
  const context = await launch();
  try {
    const session = await newSession("MCP dead", "mcp_add.json");
    const page = await openPage(context, session.id);
    await send(page, "What is 20 + 22, says the MCP server?");
    await waitTurnStatus(page, "complete"); // the turn goes on with the tools it has
    const banner = page.locator("#mcp-banner");
    await banner.waitFor({ state: "visible" });
    assert.match(await banner.textContent(), /MCP server dead did not start/);
    const config = await api("/api/config");
    const states = Object.fromEntries(config.mcp_servers.map((s) => [s.name, s.state]));
    assert.deepEqual(states, { t: "up", dead: "retrying" });
    await shot(page, "mcp-server-down");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
