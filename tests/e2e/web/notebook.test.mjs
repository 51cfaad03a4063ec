// The notebook people work in (issue 15): cells edited in CodeMirror and run from the keyboard,
// added, moved and deleted; edits the assistant reads and a second tab sees live, with a visible
// conflict when two people change one cell; data files uploaded through the chat and through the
// notebook, charted by the offline demo model; the .ipynb download (test_web.py validates it and
// runs it with nbclient) and import; Stop while run_cell runs leaves no cell running; the plain
// text box the page falls back to without the editor bundle; Run all, a cell added above, moved
// down and switched to SQL; Excel and Parquet files dropped on the chat; a chart and the composer
// on a phone.

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  api, assertAccessible, launch, lastTurn, newSession, openPage, send, shot, waitTurnStatus,
} from "./support.mjs";

const CSV = "region,units,revenue\nNorth,12,340.5\nSouth,7,120.25\nEast,15,410\nWest,3,80.75\nNorth,5,150\n";
const DOWNLOADS = process.env.DOWNLOAD_DIR || "";
const DATA = process.env.DATA_DIR || ""; // book.xlsx and orders.parquet, written by test_web.py

const cellAt = (page, i) => page.locator(".cells .cell").nth(i);

// A cell's code as its editor shows it (CodeMirror's lines, or the text box's value).
function codeAt(page, i) {
  return cellAt(page, i).evaluate((node) => {
    const area = node.querySelector("textarea");
    if (area) return area.value;
    return [...node.querySelectorAll(".cm-line")].map((l) => l.textContent).join("\n");
  });
}

async function serverCells(sid) {
  return (await api(`/api/sessions/${sid}/notebook`)).cells;
}

const pageIds = (page) => page.locator(".cells .cell").evaluateAll((cs) => cs.map((c) => c.dataset.cellId));

test("cells: type and Shift+Enter shows the output; Ctrl+Enter, Escape, add, move and delete from the keyboard", async () => {
  const context = await launch();
  try {
    const session = await newSession("Editing");
    const page = await openPage(context, session.id);
    await page.waitForSelector("#live-state[data-state='live']");
    await page.click("#nb-add");
    await page.waitForSelector(".cells .cell .cm-content");
    // The new cell's editor has the focus: type, then Shift+Enter runs it and moves on.
    assert.equal(await page.evaluate(() => document.activeElement?.classList.contains("cm-content")), true);
    await page.keyboard.type("total = 6 * 7\nprint('total', total)");
    await page.keyboard.press("Shift+Enter");
    await page.waitForSelector(".cells .cell[data-status='success'] .out-stdout");
    assert.equal((await cellAt(page, 0).locator(".out-stdout").textContent()).trim(), "total 42");
    assert.equal(await cellAt(page, 0).locator(".cell-count").textContent(), "[1]");
    // No next cell: a new one below takes the focus, so what the user types next is kept.
    await page.waitForFunction(() => document.querySelectorAll(".cells .cell").length === 2
      && document.activeElement === document.querySelectorAll(".cells .cell .cm-content")[1]);
    await page.click("[aria-label='Delete cell 2']");
    await page.click("#confirm-ok");
    await page.waitForFunction(() => document.querySelectorAll(".cells .cell").length === 1);
    // The code is highlighted (CodeMirror's Python mode) and saved through the routes.
    assert.ok(await cellAt(page, 0).locator(".cm-line span").count() > 0, "highlighted");
    let stored = await serverCells(session.id);
    assert.equal(stored[0].code, "total = 6 * 7\nprint('total', total)");
    assert.equal(stored[0].status, "success");
    assert.equal(stored[0].edited_by, "user");

    // Add a cell below from the keyboard; Ctrl+Enter runs it in place.
    await page.focus("[aria-label='Add a cell below cell 1']");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.querySelectorAll(".cells .cell").length === 2);
    await page.keyboard.type("total * 2");
    await page.keyboard.press("Control+Enter");
    await cellAt(page, 1).locator(".out-text").waitFor();
    assert.equal((await cellAt(page, 1).locator(".out-text").textContent()).trim(), "84");
    assert.equal(await page.evaluate(() => document.activeElement?.closest(".cell")?.getAttribute("aria-label")),
      "Cell 2, Python, success", "Ctrl+Enter keeps the focus in the cell");
    // Escape leaves the editor for the cell; Enter goes back in.
    await page.keyboard.press("Escape");
    assert.equal(await page.evaluate(() => document.activeElement?.classList.contains("cell")), true);
    await page.keyboard.press("Enter");
    assert.equal(await page.evaluate(() => document.activeElement?.classList.contains("cm-content")), true);

    // Move cell 2 up: the page and the server agree on the new order.
    const before = await pageIds(page);
    await page.focus("[aria-label='Move cell 2 up']");
    await page.keyboard.press("Enter");
    await page.waitForFunction((first) => document.querySelector(".cells .cell")?.dataset.cellId === first, before[1]);
    assert.deepEqual(await pageIds(page), [before[1], before[0]]);
    assert.deepEqual((await serverCells(session.id)).map((c) => c.id), [before[1], before[0]]);

    // Every control has a name and is a button the keyboard reaches.
    const unnamed = await page.locator(".cell-tools button:not([aria-label]), .notebook-toolbar button:not([aria-label])").count();
    assert.equal(unnamed, 0);
    await assertAccessible(page, "the notebook with two edited cells");
    await shot(page, "notebook-editing");

    // Delete cell 1 through the page's dialog (Cancel first keeps it).
    await page.click("[aria-label='Delete cell 1']");
    await page.waitForSelector("#confirm-dialog[open]");
    await page.keyboard.press("Escape");
    await page.waitForSelector("#confirm-dialog:not([open])", { state: "attached" });
    assert.equal(await page.locator(".cells .cell").count(), 2);
    await page.click("[aria-label='Delete cell 1']");
    await page.click("#confirm-ok");
    await page.waitForFunction(() => document.querySelectorAll(".cells .cell").length === 1);
    stored = await serverCells(session.id);
    assert.deepEqual(stored.map((c) => c.id), [before[0]]);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a user's edit reaches the assistant and a second tab live; a cell being edited shows the other version", async () => {
  const context = await launch();
  try {
    const session = await newSession("Together", "notebook_reader.json");
    const cell = await api(`/api/sessions/${session.id}/notebook/cells`, { method: "POST", body: { code: "a = 1" } });
    const first = await openPage(context, session.id);
    const second = await openPage(context, session.id);
    await second.waitForSelector("#live-state[data-state='live']");
    await first.bringToFront();
    await first.waitForSelector(".cells .cell .cm-content");
    // The first tab edits the cell (select all, type); Ctrl+Enter saves and runs it.
    await cellAt(first, 0).locator(".cm-content").click();
    await first.keyboard.press("Control+A");
    await first.keyboard.type("a = 2  # edited in the page");
    await first.keyboard.press("Control+Enter");
    await cellAt(first, 0).locator(".cell-count", { hasText: "[1]" }).waitFor();
    // The second tab, not editing, shows the edit live.
    await second.waitForFunction(() => [...document.querySelectorAll(".cells .cell .cm-line")]
      .map((l) => l.textContent).join("\n") === "a = 2  # edited in the page");
    // The assistant's next get_notebook_state reads it.
    await send(first, "What does the notebook hold?");
    await waitTurnStatus(first, "complete");
    assert.match(await lastTurn(first).locator(".block-text").last().textContent(),
      /The first cell says: a = 2 {2}# edited in the page/);

    // The second tab starts editing; meanwhile the cell changes elsewhere: the second tab keeps its
    // text and shows the other version, and "Keep mine" saves its own over it.
    await second.bringToFront();
    await cellAt(second, 0).locator(".cm-content").click();
    await api(`/api/sessions/${session.id}/notebook/cells/${cell.id}`, { method: "PATCH", body: { code: "a = 3  # theirs" } });
    await cellAt(second, 0).locator(".cell-conflict:not([hidden])").waitFor();
    assert.match(await cellAt(second, 0).locator(".conflict-theirs").textContent(), /a = 3 {2}# theirs/);
    assert.equal(await codeAt(second, 0), "a = 2  # edited in the page", "not overwritten");
    // The first tab was not editing: it simply follows.
    await first.waitForFunction(() => [...document.querySelectorAll(".cells .cell .cm-line")]
      .map((l) => l.textContent).join("\n") === "a = 3  # theirs");
    await second.keyboard.press("End");
    await second.keyboard.type(" + 40");
    await shot(second, "notebook-conflict");
    await cellAt(second, 0).locator(".conflict-keep").click();
    await cellAt(second, 0).locator(".cell-conflict").waitFor({ state: "hidden" });
    await first.waitForFunction(() => document.querySelector(".cells .cell .cm-line")?.textContent === "a = 2  # edited in the page + 40");
    assert.equal((await serverCells(session.id))[0].code, "a = 2  # edited in the page + 40");

    // A save from a stale copy (this tab's live channel closed, so it missed the change) is a 409,
    // which the page shows the same way; "Take theirs" takes the other version.
    await second.evaluate(() => window.turnstream.live.close());
    await api(`/api/sessions/${session.id}/notebook/cells/${cell.id}`, { method: "PATCH", body: { code: "b = 5" } });
    const conflicts = [];
    second.on("response", (r) => r.request().method() === "PATCH" && conflicts.push(r.status()));
    await cellAt(second, 0).locator(".cm-content").click();
    await second.keyboard.type(" # more");
    await cellAt(second, 0).locator(".cell-conflict:not([hidden])").waitFor();
    assert.deepEqual(conflicts, [409]);
    assert.match(await cellAt(second, 0).locator(".conflict-theirs").textContent(), /^b = 5$/);
    await cellAt(second, 0).locator(".conflict-take").click();
    assert.equal(await codeAt(second, 0), "b = 5");
    assert.equal((await serverCells(session.id))[0].code, "b = 5");
    assert.deepEqual(first.errors, []);
    assert.deepEqual(second.errors, []);
  } finally {
    await context.close();
  }
});

test("a CSV attached in the chat is uploaded, the demo model charts it, and the notebook downloads as .ipynb", async () => {
  const context = await launch();
  try {
    const session = await newSession("My data");
    const page = await openPage(context, session.id);
    await page.setInputFiles("#attach-input", { name: "sales.csv", mimeType: "text/csv", buffer: Buffer.from(CSV) });
    await page.waitForFunction(() => /I uploaded sales\.csv/.test(document.querySelector("#message").value));
    const said = await page.inputValue("#message");
    assert.match(said, /sales\.csv \(5 rows; columns region, units, revenue\), loaded as `sales`/);
    await page.waitForSelector("#data-files .data-file[data-name='sales.csv']");
    await page.press("#message", "Enter");
    await waitTurnStatus(page, "complete");
    const answer = await lastTurn(page).innerText();
    assert.match(answer, /You uploaded sales\.csv: 5 rows with the columns/);
    assert.match(answer, /region/);
    await page.waitForFunction(() => document.querySelectorAll(".cell[data-status='success']").length === 2);
    await page.waitForSelector(".cell .out-table table");
    await page.waitForSelector(".cell .out-plotly.rendered .js-plotly-plot", { timeout: 30_000 });
    const title = await page.locator(".cell .out-plotly .plot").getAttribute("aria-label");
    assert.equal(title, "Chart: units by region"); // the first numeric column by the first other one
    await shot(page, "notebook-chat-upload");

    // Download the .ipynb (test_web.py validates it and runs it with the same data file).
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#nb-download")]);
    assert.match(download.suggestedFilename(), /\.ipynb$/);
    const doc = JSON.parse(fs.readFileSync(await download.path(), "utf8"));
    assert.equal(doc.nbformat, 4);
    if (DOWNLOADS) {
      fs.copyFileSync(await download.path(), path.join(DOWNLOADS, "notebook.ipynb"));
      fs.writeFileSync(path.join(DOWNLOADS, "sales.csv"), CSV);
    }

    // Import it into a new chat's empty notebook (all but the cell that reads the data files, which
    // are uploaded on their own).
    const expected = doc.cells.filter((c) => c.metadata?.turnstream?.role !== "files").length;
    assert.equal(expected, 2);
    const other = await newSession("Imported");
    const fresh = await openPage(context, other.id);
    await fresh.setInputFiles("#nb-import-input", await download.path());
    await fresh.waitForFunction((n) => document.querySelectorAll(".cells .cell").length === n, expected);
    assert.equal((await serverCells(other.id)).length, expected);
    assert.deepEqual(page.errors, []);
    assert.deepEqual(fresh.errors, []);
  } finally {
    await context.close();
  }
});

test("a CSV dropped on the notebook is listed, can be deleted, and the demo model charts it", async () => {
  const context = await launch();
  try {
    const session = await newSession("Dropped data");
    const page = await openPage(context, session.id);
    await page.waitForSelector("#live-state[data-state='live']");
    const drop = await page.evaluateHandle((csv) => {
      const dt = new DataTransfer();
      dt.items.add(new File([csv], "orders-2024.csv", { type: "text/csv" }));
      return dt;
    }, CSV);
    await page.dispatchEvent("#notebook .cells-scroll", "dragover", { dataTransfer: drop });
    await page.dispatchEvent("#notebook .cells-scroll", "drop", { dataTransfer: drop });
    await page.waitForSelector("#data-files .data-file[data-name='orders-2024.csv']");
    assert.match(await page.locator("#data-files .data-file").textContent(), /5 rows × 3 columns/);
    const files = (await api(`/api/sessions/${session.id}/notebook/files`)).files;
    assert.deepEqual(files.map((f) => [f.name, f.variable]), [["orders-2024.csv", "orders_2024"]]);
    // The upload button takes a second file; one that lies about its type is refused, in words.
    await page.setInputFiles("#nb-file-input", { name: "fake.csv", mimeType: "text/csv",
      buffer: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0xff, 0xfe]) });
    await page.waitForSelector(".toast-error", { hasText: "Not uploaded" });
    assert.equal((await api(`/api/sessions/${session.id}/notebook/files`)).files.length, 1);
    await send(page, "Analyse my data");
    await waitTurnStatus(page, "complete");
    assert.match(await lastTurn(page).innerText(), /You uploaded orders-2024\.csv/);
    await page.waitForSelector(".cell .out-plotly.rendered .js-plotly-plot", { timeout: 30_000 });
    // Delete the file, through the page's dialog.
    await page.click("[aria-label='Delete the file orders-2024.csv']");
    await page.click("#confirm-ok");
    await page.waitForSelector("#data-files", { state: "hidden" });
    assert.deepEqual((await api(`/api/sessions/${session.id}/notebook/files`)).files, []);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("Stop while run_cell runs leaves no cell running, and Interrupt stops a cell the user ran", async () => {
  const context = await launch();
  try {
    const session = await newSession("Stop a run", "slow_cell.json");
    const page = await openPage(context, session.id);
    await send(page, "Run something slow");
    await page.waitForSelector(".cells .cell[data-status='running']");
    await page.click("#stop");
    await waitTurnStatus(page, "cancelled");
    await page.waitForSelector(".cells .cell[data-status='error'] .out-error");
    assert.equal(await page.locator(".cells .cell[data-status='running']").count(), 0);
    const stored = await serverCells(session.id);
    assert.deepEqual(stored.map((c) => c.status), ["error"]);
    assert.equal(stored[0].outputs.at(-1).interrupted, true);

    // The user runs it again from the page; its Interrupt button stops it.
    await page.click("[aria-label='Run cell 1 (Ctrl+Enter)']");
    await page.waitForSelector(".cells .cell[data-status='running']");
    await page.click("[aria-label='Interrupt cell 1']");
    await page.waitForSelector(".cells .cell[data-status='error']");
    assert.match(await cellAt(page, 0).locator(".out-error .err-head").textContent(), /KeyboardInterrupt/);
    assert.deepEqual((await serverCells(session.id)).map((c) => c.status), ["error"]);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("without the editor bundle, cells are plain text boxes with the same keys", async () => {
  const context = await launch();
  try {
    await context.route("**/static/vendor/codemirror/**", (route) => route.abort());
    const session = await newSession("No editor bundle");
    const page = await openPage(context, session.id);
    await page.click("#nb-add");
    await page.waitForSelector(".cells .cell textarea.cell-textarea:focus");
    await page.keyboard.type("print('plain')");
    await page.keyboard.press("Shift+Enter");
    await page.waitForSelector(".cells .cell .out-stdout");
    assert.equal((await cellAt(page, 0).locator(".out-stdout").textContent()).trim(), "plain");
    assert.equal((await serverCells(session.id))[0].code, "print('plain')");
    assert.equal(await page.locator(".cm-editor").count(), 0);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("Run all runs every cell in order; a cell added above, moved down, and one switched to SQL runs as SQL", async () => {
  const context = await launch();
  try {
    const session = await newSession("Run all");
    const cellsUrl = `/api/sessions/${session.id}/notebook/cells`;
    await api(cellsUrl, { method: "POST", body: { code: "base = 20" } });
    await api(cellsUrl, { method: "POST", body: { code: "base + 1" } });
    const page = await openPage(context, session.id);
    await page.waitForSelector("#live-state[data-state='live']");
    await page.waitForFunction(() => document.querySelectorAll(".cells .cell .cm-content").length === 2);

    // Add a cell above cell 1: it comes first, with the focus in its editor.
    await page.click("[aria-label='Add a cell above cell 1']");
    await page.waitForFunction(() => document.querySelectorAll(".cells .cell").length === 3);
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Code of cell 1");
    await page.keyboard.type("import pandas as pd\nframe = pd.DataFrame({'n': [1, 2, 3]})");
    const [added, first, second] = await pageIds(page);
    assert.deepEqual((await serverCells(session.id)).map((c) => c.id), [added, first, second]);

    // Move it down: second, in the page and on the server.
    await page.click("[aria-label='Move cell 1 down']");
    await page.waitForFunction((id) => document.querySelectorAll(".cells .cell")[1]?.dataset.cellId === id, added);
    assert.deepEqual(await pageIds(page), [first, added, second]);
    assert.deepEqual((await serverCells(session.id)).map((c) => c.id), [first, added, second]);

    // A cell below the last, switched to SQL: a SQL statement, which Python could not run.
    await page.click("[aria-label='Add a cell below cell 3']");
    await page.waitForFunction(() => document.querySelectorAll(".cells .cell").length === 4);
    await page.keyboard.type("SELECT SUM(n) * 10 AS total FROM frame");
    await page.selectOption("[aria-label='Language of cell 4']", "sql");
    await page.waitForSelector(".cells .cell[aria-label='Cell 4, SQL, idle']"); // as the server answered
    assert.equal((await serverCells(session.id)).at(-1).language, "sql");

    // Run all: every cell, in order, the unsaved code saved first.
    await page.click("#nb-run-all");
    await page.waitForFunction(() => document.querySelectorAll(".cells .cell[data-status='success']").length === 4);
    assert.deepEqual(await page.locator(".cells .cell .cell-count").allTextContents(), ["[1]", "[2]", "[3]", "[4]"]);
    assert.equal((await cellAt(page, 2).locator(".out-text").textContent()).trim(), "21");
    const table = await cellAt(page, 3).locator(".out-table").innerText();
    assert.match(table, /total[\s\S]*\b60\b/, table);
    const stored = await serverCells(session.id);
    assert.deepEqual(stored.map((c) => [c.language, c.status]),
      [["python", "success"], ["python", "success"], ["python", "success"], ["sql", "success"]]);
    assert.equal(stored[1].code, "import pandas as pd\nframe = pd.DataFrame({'n': [1, 2, 3]})");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("Excel and Parquet files dropped on the chat are uploaded, the message box gives their shape, and the demo charts one", async () => {
  assert.ok(DATA, "DATA_DIR must name the folder test_web.py writes book.xlsx and orders.parquet into");
  const context = await launch();
  try {
    const session = await newSession("Dropped on the chat");
    const page = await openPage(context, session.id);
    await page.waitForSelector("#live-state[data-state='live']");
    const files = ["book.xlsx", "orders.parquet"].map((name) => ({
      name, b64: fs.readFileSync(path.join(DATA, name)).toString("base64") }));
    const drop = await page.evaluateHandle((list) => {
      const dt = new DataTransfer();
      for (const f of list) dt.items.add(new File([Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0))], f.name));
      return dt;
    }, files);
    await page.dispatchEvent("#chat-log", "dragover", { dataTransfer: drop });
    await page.dispatchEvent("#chat-log", "drop", { dataTransfer: drop });
    await page.waitForFunction(() => /I uploaded book\.xlsx/.test(document.querySelector("#message").value));
    const said = await page.inputValue("#message");
    assert.match(said, /book\.xlsx \(4 rows; columns region, units, price\), loaded as `book`/);
    assert.match(said, /orders\.parquet \(4 rows; columns region, units, price\), loaded as `orders`/);
    for (const { name } of files) {
      const listed = page.locator(`#data-files .data-file[data-name='${name}']`);
      await listed.waitFor();
      assert.match(await listed.textContent(), /4 rows × 3 columns/);
    }
    const stored = (await api(`/api/sessions/${session.id}/notebook/files`)).files;
    assert.deepEqual(stored.map((f) => [f.name, f.rows, f.numeric_columns]).sort(),
      [["book.xlsx", 4, ["units", "price"]], ["orders.parquet", 4, ["units", "price"]]]);
    // Sent as written: the demo model says the first file's shape, reads it in the kernel, charts it.
    await page.press("#message", "Enter");
    await waitTurnStatus(page, "complete");
    assert.match(await lastTurn(page).innerText(), /You uploaded book\.xlsx: 4 rows with the columns/);
    await page.waitForSelector(".cell .out-plotly.rendered .js-plotly-plot", { timeout: 30_000 });
    assert.equal(await page.locator(".cell .out-plotly .plot").getAttribute("aria-label"), "Chart: units by region");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("on a phone, a chart's long title wraps inside the chart and the composer's placeholder fits", async () => {
  const context = await launch({ viewport: { width: 390, height: 844 } });
  try {
    const session = await newSession("A chart on a phone");
    const title = "Revenue by region for the orders of at least four units, in euros";
    const cell = await api(`/api/sessions/${session.id}/notebook/cells`, { method: "POST", body: {
      code: `import plotly.express as px\npx.bar(x=["North", "South"], y=[3, 4], title=${JSON.stringify(title)})` } });
    await api(`/api/sessions/${session.id}/notebook/cells/${cell.id}/run`, { method: "POST" });
    const page = await openPage(context, session.id);

    // The composer shows the short placeholder, and the whole of it fits in its box.
    const box = await page.locator("#message").evaluate((el) => {
      const style = getComputedStyle(el);
      const ruler = document.createElement("canvas").getContext("2d");
      ruler.font = `${style.fontSize} ${style.fontFamily}`;
      return { text: el.placeholder, width: ruler.measureText(el.placeholder).width,
        room: el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) };
    });
    assert.equal(box.text, "Ask for an analysis…");
    assert.ok(box.width <= box.room, JSON.stringify(box));

    // The chart's title is drawn whole, on several lines, inside the chart and above its plot.
    await page.click("#tab-notebook");
    await page.waitForSelector(".cell .out-plotly.rendered .js-plotly-plot");
    await page.waitForFunction(() => {
      const plot = document.querySelector(".cell .out-plotly .js-plotly-plot");
      const svg = plot?.querySelector("svg.main-svg")?.getBoundingClientRect();
      const area = plot?.querySelector(".draglayer .nsewdrag")?.getBoundingClientRect();
      const drawn = plot?.querySelector(".gtitle")?.getBoundingClientRect();
      return Boolean(svg && area && drawn && drawn.width > 0 && drawn.left >= svg.left && drawn.right <= svg.right
        && drawn.top >= svg.top && drawn.bottom <= area.top);
    });
    const lines = await page.locator(".cell .gtitle tspan.line").count();
    assert.ok(lines >= 2, `the title is on ${lines} line(s)`);
    const drawn = await page.locator(".cell .gtitle").textContent();
    assert.equal(drawn.replace(/\s/g, ""), title.replace(/\s/g, ""));
    await shot(page, "notebook-chart-390x844");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
