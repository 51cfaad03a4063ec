// A notebook that forgives (issue 26): restarting the kernel from the notebook's header, the
// marks of cells that ran in a kernel that is gone, a dependent cell that waits on an
// interrupted one instead of running it again, Tab that never enters a code editor, a new chat
// that is ready before its first message, Shift+Enter on the last cell, a refused upload in
// words, and a chart's toolbar beside its title on a phone.

import assert from "node:assert/strict";
import { test } from "node:test";
import { api, launch, lastTurn, newSession, openPage, send, shot, waitTurnStatus } from "./support.mjs";

const cellAt = (page, i) => page.locator(".cells .cell").nth(i);

async function serverCells(sid) {
  return (await api(`/api/sessions/${sid}/notebook`)).cells;
}

async function addCell(sid, code) {
  return api(`/api/sessions/${sid}/notebook/cells`, { method: "POST", body: { code } });
}

// Polls `check` (an observable state: a route's answer) until it holds, for at most `ms`.
async function until(check, what, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function confirm(page) {
  await page.waitForSelector("#confirm-dialog[open]");
  await page.click("#confirm-ok");
  await page.waitForSelector("#confirm-dialog", { state: "hidden" });
}

test("Restart kernel asks first, shows what ran as from the previous kernel, and Restart and run all runs it again", async () => {
  const context = await launch();
  try {
    const session = await newSession("Restart");
    const first = await addCell(session.id, "a = 20");
    const second = await addCell(session.id, "a * 2 + 2");
    await api(`/api/sessions/${session.id}/notebook/cells/${second.id}/run`, { method: "POST" });
    const page = await openPage(context, session.id);
    await page.waitForSelector("#live-state[data-state='live']");
    await page.waitForSelector(".cells .cell[data-status='success'] .out-text");

    // Cancel keeps the kernel; Restart (confirmed) marks both cells.
    await page.click("#nb-restart");
    await page.waitForSelector("#confirm-dialog[open]");
    await page.click("#confirm-dialog button[value='cancel']");
    assert.deepEqual((await serverCells(session.id)).map((c) => c.previous_kernel), [false, false]);
    await page.click("#nb-restart");
    await confirm(page);
    await page.waitForSelector(".cells .cell[data-previous='true'] >> nth=1");
    assert.match(await cellAt(page, 1).locator(".badge").textContent(), /success · previous kernel/);
    const stored = await serverCells(session.id);
    assert.deepEqual(stored.map((c) => [c.id, c.previous_kernel, c.stale]), [[first.id, true, true], [second.id, true, true]]);

    await page.click("#nb-restart-run");
    await confirm(page);
    await page.waitForFunction(() => [...document.querySelectorAll(".cells .cell")].every(
      (c) => c.dataset.previous === "false" && c.dataset.status === "success"));
    assert.equal((await cellAt(page, 1).locator(".out-text").textContent()).trim(), "42");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a cell that uses an interrupted loop waits on it instead of running it again", async () => {
  const context = await launch();
  try {
    const session = await newSession("Interrupted loop");
    await addCell(session.id, "n = 0\nwhile True:\n    n += 1");
    const uses = await addCell(session.id, "n");
    const page = await openPage(context, session.id);
    await page.waitForSelector("#live-state[data-state='live']");
    await page.click("[aria-label='Run cell 1 (Ctrl+Enter)']");
    await page.waitForSelector(".cells .cell[data-status='running']");
    await page.click("[aria-label='Interrupt cell 1']");
    await page.waitForSelector(".cells .cell[data-status='error']");
    await page.click("[aria-label='Run cell 2 (Ctrl+Enter)']");
    await page.waitForSelector(".cells .cell[data-status='blocked']");
    const badge = (await cellAt(page, 1).locator(".badge").textContent()).trim();
    const loopId = (await serverCells(session.id))[0].id;
    assert.equal(badge, `waits on #${loopId}, which was interrupted: run or edit it`);
    const stored = await serverCells(session.id);
    assert.equal(stored[0].status, "error");
    assert.equal(stored[0].execution_count, 1, "the loop ran once, never again");
    assert.equal(stored.find((c) => c.id === uses.id).blocked_by, loopId);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a cell whose upstream cell runs first shows that it waits for it, never idle", async () => {
  const context = await launch();
  try {
    const session = await newSession("Waiting");
    const slow = await addCell(session.id, "import time\ntime.sleep(2)\nx = 2");
    await addCell(session.id, "x * 21");
    const page = await openPage(context, session.id);
    await page.waitForSelector("#live-state[data-state='live']");
    await page.waitForSelector(".cells .cell >> nth=1");
    await page.click("[aria-label='Run cell 2 (Ctrl+Enter)']");
    await page.waitForSelector(".cells .cell:nth-child(2)[data-status='waiting']");
    const badge = cellAt(page, 1).locator(".badge");
    assert.equal((await badge.textContent()).trim(), `waiting for #${slow.id}`);
    assert.equal(await cellAt(page, 1).locator(".cell-count").textContent(), "[*]");
    await page.waitForSelector(".cells .cell:nth-child(2)[data-status='success'] .out-text");
    assert.equal((await cellAt(page, 1).locator(".out-text").textContent()).trim(), "42");
    assert.equal((await badge.textContent()).trim(), "success");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("thirty Tabs from the message box enter no editor and change no code; Enter on a cell edits it", async () => {
  const context = await launch();
  try {
    const session = await newSession("Keyboard");
    await addCell(session.id, "for i in range(3):\n    print(i)");
    await addCell(session.id, "x = 1");
    const before = await serverCells(session.id);
    const page = await openPage(context, session.id);
    await page.waitForSelector("#live-state[data-state='live']");
    await page.waitForSelector(".cells .cell >> nth=1");
    await page.focus("#message");
    const inEditor = () => page.evaluate(() => Boolean(document.activeElement?.closest(".cell-editor")));
    let cardsReached = 0;
    for (let i = 0; i < 30; i += 1) {
      await page.keyboard.press("Tab");
      assert.equal(await inEditor(), false, `Tab ${i + 1} entered a code editor`);
      if (await page.evaluate(() => document.activeElement?.classList.contains("cell"))) cardsReached += 1;
    }
    assert.ok(cardsReached >= 1, "Tab reaches the cells themselves");
    assert.deepEqual(await serverCells(session.id), before);

    // On a cell, Enter goes into its editor (whose hint names Escape), typing edits, Escape leaves.
    await cellAt(page, 1).focus();
    assert.match(await cellAt(page, 1).locator(".cell-hint").textContent(), /Enter edits the code/);
    await page.keyboard.press("Enter");
    assert.equal(await inEditor(), true);
    const hint = cellAt(page, 1).locator(".cell-hint");
    assert.equal(await hint.isVisible(), true);
    assert.match(await hint.textContent(), /Escape leaves the editor/);
    await page.keyboard.press("End");
    await page.keyboard.type("0");
    await page.keyboard.press("Escape");
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.cellId), before[1].id);
    await until(async () => (await serverCells(session.id))[1].code === "x = 10", "the edit to be saved");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

const IPYNB = JSON.stringify({
  nbformat: 4, nbformat_minor: 5, metadata: {},
  cells: [{ cell_type: "code", id: "c1", metadata: {}, source: "x = 6 * 7", outputs: [], execution_count: null }],
});
const SALES = "region,units\nNorth,3\nSouth,5\n";

// Each way a chat starts, from a new chat: what to do, and what must then be in its notebook.
const STARTS = {
  message: async (page) => {
    await page.fill("#message", "hello");
    await page.press("#message", "Enter");
  },
  chip: (page) => page.click(".intro .btn-suggestion >> nth=0"),
  attach: async (page) => {
    await page.setInputFiles("#attach-input", { name: "sales.csv", mimeType: "text/csv", buffer: Buffer.from(SALES) });
    await page.waitForFunction(() => document.querySelector("#message").value.startsWith("I uploaded sales.csv"));
  },
  cell: async (page) => {
    await page.click("#nb-add");
    await page.waitForSelector(".cells .cell");
  },
  upload: async (page) => {
    await page.setInputFiles("#nb-file-input", { name: "sales.csv", mimeType: "text/csv", buffer: Buffer.from(SALES) });
    await page.waitForSelector("#data-files .data-file[data-name='sales.csv']");
  },
  import: async (page) => {
    await page.setInputFiles("#nb-import-input", { name: "start.ipynb", mimeType: "application/x-ipynb+json", buffer: Buffer.from(IPYNB) });
    await page.waitForSelector(".cells .cell");
  },
};

test("a new chat is ready: + Cell, Upload and Import work before any message, and every way a chat starts tops the sidebar at once", async () => {
  const context = await launch();
  try {
    const page = await openPage(context, null);
    const started = [];
    for (const [way, start] of Object.entries(STARTS)) {
      await page.click("#new-session");
      await page.waitForFunction(() => !document.body.dataset.sessionId);
      // Nothing to be offline from yet; the buttons that can start a chat are there to use.
      assert.equal(await page.locator("#live-state").isVisible(), false, `${way}: a connection badge in a new chat`);
      for (const id of ["#nb-add", "#nb-upload", "#nb-import"]) {
        assert.equal(await page.locator(id).isEnabled(), true, `${way}: ${id} is disabled in a new chat`);
      }
      await start(page);
      await page.waitForFunction(() => Boolean(document.body.dataset.sessionId));
      const sid = await page.evaluate(() => document.body.dataset.sessionId);
      assert.ok(!started.includes(sid), `${way} opened an earlier chat`);
      started.push(sid);
      await page.waitForFunction((id) => document.querySelector("#session-list .session-open")?.dataset.sessionId === id,
        sid, { timeout: 2000 });
      const nb = await api(`/api/sessions/${sid}/notebook`);
      if (way === "cell") assert.equal(nb.cells.length, 1);
      if (way === "attach" || way === "upload") assert.deepEqual(nb.files.map((f) => f.name), ["sales.csv"]);
      if (way === "import") assert.deepEqual(nb.cells.map((c) => c.code), ["x = 6 * 7"]);
      if (way === "attach") await page.fill("#message", ""); // the line it offers is not sent
    }
    // Every one of them is in the sidebar, newest first, and opens from there.
    const listed = await page.locator("#session-list .session-open").evaluateAll((bs) => bs.map((b) => b.dataset.sessionId));
    assert.deepEqual(listed.slice(0, started.length), [...started].reverse());
    await page.click(`#session-list .session-open[data-session-id='${started[2]}']`);
    await page.waitForSelector(`body[data-session-id='${started[2]}']`);
    await page.waitForSelector("#data-files .data-file[data-name='sales.csv']");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("Shift+Enter on the last cell keeps what is typed next, and a refused upload is said in words", async () => {
  const context = await launch();
  try {
    const session = await newSession("Last cell");
    const only = await addCell(session.id, "a = 1");
    const page = await openPage(context, session.id);
    await page.waitForSelector("#live-state[data-state='live']");
    await cellAt(page, 0).focus();
    await page.keyboard.press("Enter");
    await page.keyboard.press("Shift+Enter");
    await page.waitForFunction(() => document.activeElement === document.querySelectorAll(".cells .cell .cm-content")[1]);
    await page.keyboard.type("b = a + 1");
    await until(async () => (await serverCells(session.id))[1]?.code === "b = a + 1", "the new cell's code to be saved");
    const stored = await serverCells(session.id);
    assert.deepEqual(stored.map((c) => c.code), ["a = 1", "b = a + 1"]);
    assert.equal(stored[0].id, only.id);

    await page.setInputFiles("#nb-file-input", { name: "x.csv", mimeType: "text/csv",
      buffer: Buffer.from("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "latin1") });
    const said = (await page.locator("#toasts .toast-error").last().textContent()).trim();
    assert.equal(said, "Not uploaded: x.csv is not CSV: it holds binary data");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("on a phone, a chart's toolbar never covers its title", async () => {
  const context = await launch({ viewport: { width: 390, height: 844 } });
  try {
    const session = await newSession("Toolbar on a phone");
    const cell = await addCell(session.id,
      'import plotly.express as px\npx.bar(x=["North", "South"], y=[3, 4], title="Units sold by region in the spring quarter")');
    await api(`/api/sessions/${session.id}/notebook/cells/${cell.id}/run`, { method: "POST" });
    const page = await openPage(context, session.id);
    await page.click("#tab-notebook");
    await page.waitForSelector(".cell .out-plotly.rendered .js-plotly-plot .gtitle");
    await page.hover(".cell .out-plotly .js-plotly-plot"); // the toolbar shows while the pointer is on the chart
    await page.waitForFunction(() => {
      const bar = document.querySelector(".cell .out-plotly .modebar");
      return bar && getComputedStyle(bar).opacity === "1";
    });
    const boxes = await page.evaluate(() => {
      const box = (sel) => document.querySelector(sel).getBoundingClientRect().toJSON();
      return { bar: box(".cell .out-plotly .modebar"), title: box(".cell .out-plotly .gtitle"),
        cell: box(".cell .cell-outputs") };
    });
    const { bar, title } = boxes;
    const overlap = bar.left < title.right && title.left < bar.right && bar.top < title.bottom && title.top < bar.bottom;
    assert.equal(overlap, false, JSON.stringify(boxes));
    assert.ok(bar.top >= boxes.cell.top, `the toolbar is inside the cell's outputs: ${JSON.stringify(boxes)}`);
    await shot(page, "notebook-chart-toolbar-390x844");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("Escape stops a turn started from a suggestion", async () => {
  const context = await launch();
  try {
    const page = await openPage(context, null);
    await page.click("#new-session");
    await page.click(".intro .btn-suggestion >> text=Create an example notebook");
    await page.waitForSelector(".turn:last-of-type[data-status='running']");
    await page.waitForFunction(() => window.turnstream.chat.active?.turnId);
    await page.keyboard.press("Escape");
    await page.waitForSelector(".turn:last-of-type[data-status='cancelled']");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("Retry shows the question once, and so does the chat after a reload", async () => {
  const context = await launch();
  try {
    const session = await newSession("Retried", "overloaded_retry.json");
    const page = await openPage(context, session.id);
    await send(page, "Summarise the sales");
    await waitTurnStatus(page, "failed");
    await lastTurn(page).getByRole("button", { name: "Retry: send this message again" }).click();
    await waitTurnStatus(page, "complete");
    const shown = () => page.locator(".turn .msg-user .msg-body:visible").allInnerTexts();
    assert.deepEqual(await shown(), ["Summarise the sales"]);
    assert.match(await page.locator(".turn").first().locator(".block-error").innerText(), /overloaded/);
    await page.reload();
    await page.waitForSelector(`body[data-session-id='${session.id}'] .turn[data-status='complete']`);
    assert.deepEqual(await shown(), ["Summarise the sales"]);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a tool call's duration after a reload is the one it took, not the reload's", async () => {
  const context = await launch();
  try {
    const session = await newSession("Timed", "timed_cell.json");
    const page = await openPage(context, session.id);
    await send(page, "Run the slow cell");
    await waitTurnStatus(page, "complete");
    const took = async () => {
      const text = await page.locator(".block-tool[data-state='done'][aria-label='Tool call run_cell'] .tool-time").textContent();
      const m = /^([\d.]+) s$/.exec(text.trim());
      assert.ok(m, `the run_cell card says ${JSON.stringify(text)}`);
      return Number(m[1]);
    };
    const live = await took();
    assert.ok(live >= 1.4 && live < 10, String(live));
    await page.reload();
    await page.waitForSelector(`body[data-session-id='${session.id}'] .turn[data-status='complete']`);
    const stored = await took();
    assert.ok(stored >= 1.4 && stored < 10, `after a reload: ${stored}`);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
