// Browser test of a session of several agents (docs/agents.md): the page names the agent that
// speaks on each assistant message, live and after a reload.

import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { SCENARIOS, api, launch, lastTurn, openPage, send, shot, waitTurnStatus } from "./support.mjs";

const model = (file) => `scripted:${path.join(SCENARIOS, file)}`;

async function speakers(page) {
  return lastTurn(page).locator(".msg-assistant .msg-who").allTextContents();
}

test("each assistant message names the agent that speaks, and a hand-off names the next one", async () => {
  const context = await launch();
  try {
    const session = await api("/api/sessions", { method: "POST", body: {
      title: "Agents", toolset: "none",
      agents: [
        { name: "triage", model: model("agents_triage.json"), handoffs: ["writer"] },
        { name: "writer", model: model("agents_writer.json"), handoffs: ["triage"], handoff: "next_turn" },
      ],
    } });
    assert.equal(session.current_agent, "triage");
    const page = await openPage(context, session.id);
    await send(page, "Write me a poem");
    await waitTurnStatus(page, "complete");
    assert.deepEqual(await speakers(page), ["triage", "writer"]);
    assert.match(await lastTurn(page).textContent(), /Writer here: a short poem\./);
    await shot(page, "agents-hand-off");
    // The writer handed back for the next turn: triage answers it.
    await send(page, "Thanks");
    await waitTurnStatus(page, "complete");
    assert.deepEqual(await speakers(page), ["triage"]);
    // After a reload the stored blocks name the same agents.
    await page.reload();
    await page.waitForSelector(`body[data-session-id='${session.id}']`);
    const turns = page.locator(".turn");
    await turns.nth(1).locator(".msg-assistant[data-agent='triage']").waitFor();
    assert.deepEqual(await turns.nth(0).locator(".msg-assistant .msg-who").allTextContents(), ["triage", "writer"]);
    const stored = await api(`/api/sessions/${session.id}`);
    assert.equal(stored.current_agent, "triage");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
