// Versions of a message in the web chat (issue 28, docs/branches.md): the pencil edits a message
// into a new version, Regenerate asks for another answer, "‹ 2/3 ›" switches between them; the
// branch shown is the server's current leaf, so it survives a reload and reaches a second tab (pushed
// over the WebSocket; a tab that was hidden asks again when shown).
// The scenario's nth answer of a branch says n and the message it answers, so each answer shows
// what its own path held.

import assert from "node:assert/strict";
import { test } from "node:test";
import { BASE, KEY, assertAccessible, launch, newSession, openPage, send, shot, waitTurnStatus } from "./support.mjs";

const SCENARIO = "branches.json";

function turn(page, i) {
  return page.locator("#chat-log > .turn").nth(i);
}

async function answer(page, i) {
  return (await turn(page, i).locator(".msg-assistant .block-text").last().textContent()).trim();
}

async function inputs(page) {
  return page.locator("#chat-log > .turn .msg-user > .msg-body").allTextContents();
}

async function say(page, text, count) {
  await send(page, text);
  await page.waitForSelector(`#chat-log > .turn:nth-child(${count})[data-status='complete']`);
}

// Waits until the page shows exactly `n` turns, the last one ended.
async function shows(page, n) {
  await page.waitForFunction((n) => {
    const turns = document.querySelectorAll("#chat-log > .turn");
    return turns.length === n && turns[n - 1].dataset.status === "complete"
      && !document.body.classList.contains("turn-running");
  }, n);
}

async function session(id) {
  const resp = await fetch(`${BASE}/api/sessions/${id}`, { headers: { Authorization: `Bearer ${KEY}` } });
  assert.equal(resp.status, 200);
  return resp.json();
}

// A turn through the API (its event stream read to the end).
async function postTurn(id, body) {
  const resp = await fetch(`${BASE}/api/sessions/${id}/turns`, {
    method: "POST", body: JSON.stringify(body),
    headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json", Accept: "text/event-stream" },
  });
  assert.equal(resp.status, 200, await resp.clone().text());
  await resp.text();
}

// A session whose first message has two versions, the second shown; the first version's turn.
async function twoVersions(title) {
  const s = await newSession(title, SCENARIO);
  await postTurn(s.id, { message: "one" });
  const [one] = (await session(s.id)).turns;
  await postTurn(s.id, { message: "one, again", parent_turn_id: null });
  return { s, one };
}

test("editing an earlier message sends a new version from there; the old one stays behind ‹ 1/2 ›", async () => {
  const context = await launch();
  try {
    const s = await newSession("Edit", SCENARIO);
    const page = await openPage(context, s.id);
    await say(page, "one", 1);
    await say(page, "two", 2);
    await say(page, "three", 3);
    assert.equal(await page.locator(".versions").count(), 0, "no switcher before there are versions");

    // Escape cancels: the message is as it was, and the pencil has the focus again.
    await turn(page, 1).locator(".btn-edit").click();
    await page.fill(".edit-input", "never sent");
    await page.press(".edit-input", "Escape");
    assert.equal(await page.locator(".edit-input").count(), 0);
    assert.deepEqual(await inputs(page), ["one", "two", "three"]);
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute("aria-label")), "Edit this message");

    await turn(page, 1).locator(".btn-edit").click();
    assert.equal(await page.inputValue(".edit-input"), "two", "the box holds the message");
    await page.fill(".edit-input", "two, edited");
    await page.press(".edit-input", "Enter");
    await shows(page, 2);
    assert.deepEqual(await inputs(page), ["one", "two, edited"]);
    assert.equal(await answer(page, 1), "Answer 2 of this branch, to: two, edited");
    assert.equal(await turn(page, 1).locator(".version-label").textContent(), "2/2");
    assert.equal(await turn(page, 0).locator(".versions").count(), 0);
    await shot(page, "branches-edited");

    // The server holds both: the edit follows "one", beside "two", and is the current leaf.
    const tree = await session(s.id);
    const [one, two] = tree.turns;
    const edited = tree.turns.find((t) => t.input === "two, edited");
    assert.equal(edited.parent_turn_id, one.id);
    assert.equal(two.parent_turn_id, one.id);
    assert.equal(tree.current_leaf, edited.id);

    // ‹ : the first version again, with what followed it.
    await turn(page, 1).getByRole("button", { name: "Previous version" }).click();
    await shows(page, 3);
    assert.deepEqual(await inputs(page), ["one", "two", "three"]);
    assert.equal(await answer(page, 2), "Answer 3 of this branch, to: three");
    assert.equal(await turn(page, 1).locator(".version-label").textContent(), "1/2");
    const three = tree.turns.find((t) => t.input === "three");
    assert.equal((await session(s.id)).current_leaf, three.id);

    // Going on from here follows the branch shown.
    await say(page, "four", 4);
    assert.equal(await answer(page, 3), "Answer 4 of this branch, to: four");
    assert.equal((await session(s.id)).turns.find((t) => t.input === "four").parent_turn_id, three.id);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("Regenerate asks for a sibling answer; ‹ › move between the answers", async () => {
  const context = await launch();
  try {
    const s = await newSession("Regenerate", SCENARIO);
    const page = await openPage(context, s.id);
    await say(page, "one", 1);
    await say(page, "two", 2);
    const first = await turn(page, 1).getAttribute("data-turn-id");

    await turn(page, 1).getByRole("button", { name: "Regenerate this answer" }).click();
    await page.waitForFunction((id) => {
      const t = document.querySelectorAll("#chat-log > .turn")[1];
      return t && t.dataset.turnId && t.dataset.turnId !== id && t.dataset.status === "complete";
    }, first);
    await shows(page, 2);
    const second = await turn(page, 1).getAttribute("data-turn-id");
    assert.deepEqual(await inputs(page), ["one", "two"]);
    assert.equal(await answer(page, 1), "Answer 2 of this branch, to: two");
    assert.equal(await turn(page, 1).locator(".version-label").textContent(), "2/2");
    const tree = await session(s.id);
    assert.equal(tree.turns.find((t) => t.id === second).parent_turn_id, tree.turns[0].id);

    // Regenerating the first answer: a branch of one turn; the old first turn keeps its two versions.
    await turn(page, 0).getByRole("button", { name: "Regenerate this answer" }).click();
    await page.waitForFunction(() => document.querySelector("#chat-log > .turn .version-label")?.textContent === "2/2"
      && document.querySelectorAll("#chat-log > .turn").length === 1);
    await shows(page, 1);
    assert.equal(await answer(page, 0), "Answer 1 of this branch, to: one");

    // ‹ on the first message: its first version, and the newest branch under it (the regenerated "two").
    await turn(page, 0).getByRole("button", { name: "Previous version" }).click();
    await shows(page, 2);
    assert.equal(await turn(page, 1).getAttribute("data-turn-id"), second);
    await turn(page, 1).getByRole("button", { name: "Previous version" }).click();
    await page.waitForSelector(`#chat-log > .turn:nth-child(2)[data-turn-id='${first}']`);
    assert.equal(await turn(page, 1).locator(".version-label").textContent(), "1/2");
    assert.match(await page.locator(".versions").first().getAttribute("title"), /notebook is the chat's one live document/);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("the version shown survives a reload and reaches a second tab", async () => {
  const context = await launch();
  try {
    const s = await newSession("Two tabs", SCENARIO);
    await postTurn(s.id, { message: "one" });
    await postTurn(s.id, { message: "two" });
    const [one] = (await session(s.id)).turns;
    await postTurn(s.id, { message: "two, edited", parent_turn_id: one.id });
    const a = await openPage(context, s.id);
    const b = await openPage(context, s.id);
    for (const p of [a, b]) {
      await shows(p, 2);
      assert.deepEqual(await inputs(p), ["one", "two, edited"]);
    }

    await turn(a, 1).getByRole("button", { name: "Previous version" }).click();
    await a.waitForFunction(() => document.querySelector("#chat-log > .turn:nth-child(2) .version-label")?.textContent === "1/2");
    assert.deepEqual(await inputs(a), ["one", "two"]);
    await a.reload();
    await a.waitForSelector("body[data-ready='true']");
    await shows(a, 2);
    assert.deepEqual(await inputs(a), ["one", "two"], "after a reload");

    // Tab b learns without being shown or focused: the switch is pushed to every tab of the chat
    // over the WebSocket ({"type": "session", "current_leaf"}).
    await b.waitForFunction(() => document.querySelector("#chat-log > .turn:nth-child(2) .msg-body")?.textContent === "two");
    assert.equal(await turn(b, 1).locator(".version-label").textContent(), "1/2");

    // A new version made in tab a shows in tab b as it runs (its turn events reach every tab).
    await a.bringToFront();
    await turn(a, 1).getByRole("button", { name: "Regenerate this answer" }).click();
    await shows(a, 2);
    await b.waitForFunction(() => document.querySelector("#chat-log > .turn:nth-child(2) .version-label")?.textContent === "3/3");
    await shows(b, 2);
    assert.deepEqual(await inputs(b), ["one", "two"]);
    assert.equal(await turn(b, 1).getAttribute("data-turn-id"), await turn(a, 1).getAttribute("data-turn-id"));
    assert.deepEqual([...a.errors, ...b.errors], []);
  } finally {
    await context.close();
  }
});

test("a switch keeps the focus on ‹ › when the live word of it comes before the page has it", async () => {
  const context = await launch();
  try {
    const { s, one } = await twoVersions("Echo");
    // The echo: the WebSocket's word that the session now shows `one`, which the switch below asks for.
    let heard;
    const echo = new Promise((resolve) => { heard = resolve; });
    context.on("page", (p) => p.on("websocket", (ws) => ws.on("framereceived", ({ payload }) => {
      let msg = null;
      try { msg = JSON.parse(String(payload)); } catch { /* not a message of ours */ }
      if (msg?.type === "session" && msg.current_leaf === one.id) heard();
    })));
    const page = await openPage(context, s.id);
    await shows(page, 1);
    // The switch's own reading of the session waits until the echo has come, so that the echo is first.
    let reads = 0;
    await page.route(`**/api/sessions/${s.id}`, async (route) => {
      if (route.request().method() === "GET" && reads++ === 0) await echo;
      await route.continue();
    });
    await page.focus("[aria-label='Previous version']");
    await page.keyboard.press("Enter");
    await page.waitForFunction((id) => document.querySelector("#chat-log > .turn")?.dataset.turnId === id, one.id);
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute("aria-label")), "Next version",
      "the page redrew once, for its own switch, with the focus kept");
    assert.equal(reads, 1, "the echo of this page's own switch asked nothing more");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("the pencil, Regenerate and ‹ › work from the keyboard alone and are named", async () => {
  const context = await launch();
  try {
    const { s, one } = await twoVersions("Keyboard");
    const page = await openPage(context, s.id);
    await shows(page, 1);
    const label = () => page.evaluate(() => document.activeElement.getAttribute("aria-label"));

    // Tab from the conversation: the pencil, then the versions, then Regenerate.
    await page.focus("#chat-log");
    const order = [];
    for (let i = 0; i < 4; i += 1) {
      await page.keyboard.press("Tab");
      order.push(await label());
    }
    assert.deepEqual(order, ["Edit this message", "Previous version", "Regenerate this answer", "Attach a data file (CSV, TSV, Parquet, JSON, Excel)"],
      "Next version is disabled at the last version, so Tab passes it");

    // ‹ with Enter: the first version; the focus moves to › (‹ is disabled at 1/2).
    await page.keyboard.press("Shift+Tab");
    await page.keyboard.press("Shift+Tab");
    assert.equal(await label(), "Previous version");
    await page.keyboard.press("Enter");
    await page.waitForFunction((id) => document.querySelector("#chat-log > .turn")?.dataset.turnId === id, one.id);
    assert.equal(await label(), "Next version");
    await page.keyboard.press("Space");
    await page.waitForFunction((id) => document.querySelector("#chat-log > .turn")?.dataset.turnId !== id, one.id);
    assert.equal(await label(), "Previous version");

    // The pencil with Enter, Escape, then Enter again and a new text sent with Enter.
    await page.keyboard.press("Shift+Tab");
    assert.equal(await label(), "Edit this message");
    await page.keyboard.press("Enter");
    assert.equal(await label(), "Edit your message");
    await page.keyboard.press("Escape");
    assert.equal(await label(), "Edit this message");
    await page.keyboard.press("Enter");
    await page.keyboard.press("Control+A");
    await page.keyboard.type("one, typed");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.querySelector("#chat-log > .turn .version-label")?.textContent === "3/3");
    await shows(page, 1);
    assert.deepEqual(await inputs(page), ["one, typed"]);

    // Regenerate with Enter.
    await page.focus("#chat-log");
    for (let i = 0; i < 3; i += 1) await page.keyboard.press("Tab");
    assert.equal(await label(), "Regenerate this answer");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.querySelector("#chat-log > .turn .version-label")?.textContent === "4/4");
    await shows(page, 1);
    assert.equal(await answer(page, 0), "Answer 1 of this branch, to: one, typed");
    await assertAccessible(page, "a chat with versions");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("on a phone, the branch controls are thumb-sized and work", async () => {
  const context = await launch({ viewport: { width: 390, height: 844 } });
  try {
    const { s } = await twoVersions("Phone");
    const page = await openPage(context, s.id);
    await shows(page, 1);
    for (const name of ["Edit this message", "Previous version", "Next version", "Regenerate this answer"]) {
      const box = await page.getByRole("button", { name }).boundingBox();
      assert.ok(box && box.width >= 44 && box.height >= 44, `${name}: ${JSON.stringify(box)}`);
    }
    await page.getByRole("button", { name: "Previous version" }).click();
    await page.waitForFunction(() => document.querySelector("#chat-log > .turn .version-label")?.textContent === "1/2");
    await page.getByRole("button", { name: "Edit this message" }).click();
    await page.fill(".edit-input", "one, from a phone");
    await page.getByRole("button", { name: "Send the edited message as a new version" }).click();
    await page.waitForFunction(() => document.querySelector("#chat-log > .turn .version-label")?.textContent === "3/3");
    await shows(page, 1);
    await shot(page, "branches-phone");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
