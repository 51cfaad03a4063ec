// The web page as a new user meets it (issue 16, points 1-8): tool calls as one line each,
// suggestions that work offline, chats titled and never left empty, a phone and a tablet
// layout, light and dark themes (charts included) checked with axe-core, provider errors in
// words with Retry, the page's own dialog, highlighted code that wraps.
//
// Screenshots go to tests/e2e/screenshots/ (SIZES x light/dark for the main views); axe-core's
// findings for each view are written to axe-report.json beside them.

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  SHOTS, api, assertAccessible, launch, lastTurn, newSession, openPage, send, shot, waitTurnStatus,
} from "./support.mjs";

const SIZES = [
  { name: "desktop", width: 1440, height: 900 },
  { name: "tablet", width: 768, height: 1024 },
  { name: "phone", width: 390, height: 844 },
];
const DEMO_ASK = "Create an example notebook with some data analysis";

async function newChat(page) {
  if (!(await page.locator("#new-session").isVisible())) await page.click("#menu"); // the drawer, on small screens
  await page.click("#new-session");
}

async function demoTurn(page) {
  await newChat(page);
  await page.waitForSelector(".intro .btn-suggestion");
  await send(page, DEMO_ASK);
  await waitTurnStatus(page, "complete");
  await page.waitForFunction(() => document.querySelectorAll(".cell[data-status='success']").length === 3);
  await page.waitForSelector(".cell .out-plotly.rendered .js-plotly-plot", { state: "attached", timeout: 30_000 });
}

function card(page, name, nth = 0) {
  return lastTurn(page).locator(`.block-tool[aria-label='Tool call ${name}']`).nth(nth);
}

async function open(cardLocator) {
  await cardLocator.locator("summary.tool-head").click();
  await cardLocator.locator("details.tool-details[open]").waitFor();
}

// --- 1. tool calls ------------------------------------------------------------------------
test("tool calls are one line each, and open to formatted input and output", async () => {
  const context = await launch();
  try {
    const page = await openPage(context);
    await demoTurn(page);
    const cards = lastTurn(page).locator(".block-tool");
    assert.equal(await cards.count(), 7);
    for (let i = 0; i < 7; i += 1) {
      const c = cards.nth(i);
      assert.equal(await c.locator("details").evaluate((d) => d.open), false, "collapsed");
      assert.ok((await c.boundingBox()).height < 44, "one line");
      assert.match(await c.locator(".tool-time").textContent(), /^(<1 ms|[\d.]+ ms|[\d.]+ s)$/);
    }
    const summaries = await cards.locator(".tool-summary").allTextContents();
    assert.deepEqual(summaries.map((s) => s.replace(/ · .*/, " · …")), [
      "", "Python · …", "cell 1", "SQL · …", "cell 2", "Python · …", "cell 3"]);
    assert.equal(summaries[1], "Python · import pandas as pd");
    assert.match(summaries[3], /^SQL · SELECT region, SUM\(units\)/);
    // What shows is words, not JSON: no quoted keys, no escaped newlines.
    const visible = await page.locator("#chat-log").innerText();
    assert.ok(!/"cell_id"|\\n|\\"/.test(visible), visible);
    // The whole answer, seven calls included, fits in about one screen.
    const log = await page.locator("#chat-log").evaluate((el) => ({ h: el.scrollHeight, view: el.clientHeight }));
    assert.ok(log.h < 1.5 * log.view, `the turn is ${log.h}px for a ${log.view}px view`);
    await shot(page, "tools-collapsed");

    // The SQL cell's run: its table as a table, integer sums as integers.
    await open(card(page, "run_cell", 1));
    const table = card(page, "run_cell", 1).locator(".tool-output table.tool-table");
    assert.deepEqual(await table.locator("thead th:not(.index)").allTextContents(), ["region", "units", "revenue"]);
    const west = await table.locator("tbody tr").first().locator("td").allTextContents();
    assert.deepEqual(west.slice(0, 2), ["West", "260"]);
    // The cell's code, highlighted.
    await open(card(page, "create_cell", 1));
    await card(page, "create_cell", 1).locator(".tool-input pre.code code .hljs-keyword").first().waitFor();
    assert.match(await card(page, "create_cell", 1).locator(".tool-input").innerText(), /GROUP BY region/);
    await card(page, "create_cell", 1).scrollIntoViewIfNeeded();
    await shot(page, "tools-expanded");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("long output folds, errors read as text, code in an answer is highlighted and wraps", async () => {
  const context = await launch({ viewport: { width: 1024, height: 800 } });
  try {
    const session = await newSession("Tool outputs", "tool_outputs.json");
    const page = await openPage(context, session.id);
    await send(page, "Show me what tools can return");
    await waitTurnStatus(page, "complete");
    // 40 printed lines: folded, with a button that shows them all.
    const printed = card(page, "run_cell", 0);
    await open(printed);
    const fold = printed.locator(".fold");
    assert.equal(await fold.getAttribute("class"), "fold folded");
    await fold.getByRole("button", { name: "Show all 40 lines" }).click();
    assert.equal(await fold.getAttribute("class"), "fold");
    assert.match(await fold.locator("pre").innerText(), /line 0\nline 1\n[\s\S]*line 39/);
    // A cell's error: its message as text, the traceback folded away.
    const failed = card(page, "run_cell", 1);
    await open(failed);
    assert.equal((await failed.locator(".tool-error .err-head").innerText()).trim(),
      "NameError: name 'undefined_name' is not defined");
    assert.equal(await failed.locator(".traceback").evaluate((d) => d.open), false);
    // A refused call: the error text as the model read it.
    const refused = card(page, "run_cell", 2);
    assert.equal(await refused.getAttribute("data-state"), "error");
    await open(refused);
    assert.match(await refused.locator(".tool-error-text").innerText(), /^UnknownCellError: /);
    // The answer's code block: coloured, and its long line wraps instead of scrolling.
    const code = lastTurn(page).locator(".block-text pre[data-lang='python']");
    await code.locator("code .hljs-keyword").first().waitFor();
    const size = await code.evaluate((el) => ({ scroll: el.scrollWidth, client: el.clientWidth }));
    assert.ok(size.scroll <= size.client + 1, `the code scrolls sideways: ${JSON.stringify(size)}`);
    await code.scrollIntoViewIfNeeded();
    await shot(page, "tools-errors-and-code");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

// --- 2. suggestions -----------------------------------------------------------------------
// What each suggestion must lead to; a suggestion without an entry here fails the test.
const SUGGESTED = {
  [DEMO_ASK]: async (page) => {
    await page.waitForFunction(() => document.querySelectorAll(".cell[data-status='success']").length === 3);
    assert.equal(await lastTurn(page).locator(".block-tool[aria-label='Tool call create_cell']").count(), 3);
  },
  "What time is it in my browser?": async (page) => {
    const tz = await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone);
    assert.equal(await card(page, "get_browser_time").getAttribute("data-state"), "done");
    assert.match(await lastTurn(page).locator(".block-text").last().innerText(),
      new RegExp(`^Your browser says it is .+ \\(time zone ${tz}\\)\\.$`));
    assert.equal(await page.locator(".cell").count(), 0, "no notebook was built");
  },
};

test("every suggestion the page offers does what it says, offline", async () => {
  const context = await launch();
  try {
    const page = await openPage(context);
    await page.click("#new-session");
    const offered = await page.locator(".intro .btn-suggestion").allTextContents();
    assert.ok(offered.length >= 2);
    for (const text of offered) {
      assert.ok(SUGGESTED[text], `no check for the suggestion ${JSON.stringify(text)}`);
      await page.click("#new-session");
      await page.locator(".intro").getByRole("button", { name: text, exact: true }).click(); // sends it at once
      await waitTurnStatus(page, "complete");
      assert.equal(await lastTurn(page).locator(".msg-user .msg-body").innerText(), text);
      assert.ok(!/cannot answer that/.test(await lastTurn(page).innerText()), `the demo did not know ${text}`);
      await SUGGESTED[text](page);
    }
    await shot(page, "suggestion-browser-time");
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

// --- 3. titles ----------------------------------------------------------------------------
test("a chat takes its first message as its title, and a chat never sent leaves nothing behind", async () => {
  const context = await launch();
  try {
    const page = await openPage(context);
    const before = (await api("/api/sessions")).sessions.length;
    for (let i = 0; i < 3; i += 1) {
      await page.click("#new-session");
      await page.waitForSelector(".session-list li.current.draft");
    }
    await page.locator(".session-list [data-session-id]").first().click();
    await page.waitForFunction(() => document.body.dataset.sessionId);
    assert.equal((await api("/api/sessions")).sessions.length, before, "no empty chats");
    assert.equal(await page.locator(".session-list .draft").count(), 0);

    await page.click("#new-session");
    await send(page, "What time is it in my browser?");
    await waitTurnStatus(page, "complete");
    const sid = await page.evaluate(() => document.body.dataset.sessionId);
    await page.waitForFunction((id) => document.querySelector(`[data-session-id='${id}'] .session-title`)
      ?.textContent === "What time is it in my browser?", sid);
    assert.equal(await page.locator("#chat-title").innerText(), "What time is it in my browser?");
    assert.equal((await api(`/api/sessions/${sid}`)).title, "What time is it in my browser?");

    // Another tab of an untitled chat learns its title as the first message goes.
    const blank = await api("/api/sessions", { method: "POST", body: { toolset: "notebook" } });
    const watcher = await openPage(context, blank.id);
    await watcher.waitForSelector("#live-state[data-state='live']");
    assert.equal(await watcher.locator("#chat-title").innerText(), "New chat");
    const writer = await openPage(context, blank.id);
    await send(writer, "Create an example notebook with some data analysis, a long title that gets cut");
    await watcher.waitForFunction(() => document.querySelector("#chat-title").textContent
      === "Create an example notebook with some data analysis, a long…");
    await watcher.waitForSelector(`.session-list li.current [data-session-id='${blank.id}']`);
    assert.equal(await watcher.locator(".session-list li.current .session-title").innerText(),
      "Create an example notebook with some data analysis, a long…");
    await waitTurnStatus(writer, "complete");
    assert.deepEqual([...page.errors, ...watcher.errors, ...writer.errors], []);
  } finally {
    await context.close();
  }
});

// --- 4. small screens ---------------------------------------------------------------------
for (const size of SIZES.filter((s) => s.width < 1000)) {
  test(`on a ${size.name} (${size.width}x${size.height}) chat and notebook are tabs and the chats a drawer`, async () => {
    const older = await newSession(`Older chat for the ${size.name}`);
    const context = await launch({ viewport: { width: size.width, height: size.height } });
    try {
      const page = await openPage(context);
      await demoTurn(page);
      const within = async (selector) => {
        const box = await page.locator(selector).boundingBox();
        assert.ok(box && box.height > 0 && box.x >= 0 && box.x + box.width <= size.width + 0.5
          && box.y >= 0 && box.y + box.height <= size.height + 0.5, `${selector} is cut: ${JSON.stringify(box)}`);
        return box;
      };
      assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= size.width, "no sideways scroll");
      await within("#demo-banner");
      await within("#tab-notebook");
      assert.equal(await page.locator("#notebook").isVisible(), false);
      assert.equal(await page.locator("#notebook-badge").innerText(), "3");
      assert.equal(await page.locator("#notebook-badge").getAttribute("data-fresh"), "true");
      // The notebook gets the screen.
      await page.click("#tab-notebook");
      await page.waitForSelector("#notebook .cells-scroll");
      assert.equal(await page.locator("#chat").isVisible(), false);
      const nb = await within("#notebook .cells-scroll");
      assert.ok(nb.height > 0.6 * size.height, `the notebook is ${nb.height}px high`);
      assert.equal(await page.locator("#notebook-badge").getAttribute("data-fresh"), null);
      await page.keyboard.press("ArrowLeft"); // the tabs follow the arrow keys
      await page.waitForSelector("#chat", { state: "visible" });
      // The chats are a drawer: every chat reachable, and the key can be forgotten.
      assert.equal(await page.locator("#sidebar").isVisible(), false);
      await page.click("#menu");
      await page.waitForFunction(() => document.querySelector("#sidebar").getBoundingClientRect().left >= 0); // slid in
      assert.equal(await page.locator("#menu").getAttribute("aria-expanded"), "true");
      const list = await within("#session-list");
      assert.ok(list.height > 100, `the chat list is ${list.height}px high`);
      await within("#logout");
      await within("#new-session");
      await page.locator(`[data-session-id='${older.id}']`).scrollIntoViewIfNeeded();
      await page.click(`[data-session-id='${older.id}']`);
      await page.waitForSelector(`body[data-session-id='${older.id}']`);
      await page.waitForSelector("#sidebar", { state: "hidden" });
      await page.click("#menu");
      await page.keyboard.press("Escape");
      await page.waitForSelector("#sidebar", { state: "hidden" });
      assert.equal(await page.evaluate(() => document.activeElement?.id), "menu");
      assert.deepEqual(page.errors, []);
    } finally {
      await context.close();
    }
  });
}

// --- 4, 5. every size, light and dark: screenshots, axe-core, charts in the theme ----------
async function settle(page, scheme) {
  await page.emulateMedia({ colorScheme: scheme });
  await page.waitForFunction((dark) => {
    const bg = getComputedStyle(document.body).backgroundColor;
    const [r] = bg.match(/\d+/g).map(Number);
    return dark ? r < 60 : r > 200;
  }, scheme === "dark");
}

async function chartColours(page) {
  return page.locator(".js-plotly-plot").first().evaluate((plot) => ({
    paper: plot._fullLayout.paper_bgcolor, font: plot._fullLayout.font.color,
    bodyText: getComputedStyle(document.body).color,
    shareButtons: plot.querySelectorAll(".modebar-btn[data-title^='Share'], .modebar-btn[data-title*='Chart Studio']").length,
  }));
}

function rgb(colour) {
  const m = colour.match(/[\d.]+/g).map(Number);
  if (colour.startsWith("#")) return [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16));
  return m.slice(0, 3);
}

test("every size in light and dark: axe-core finds no serious problem, charts follow the theme", async () => {
  const context = await launch();
  const report = [];
  try {
    const page = await openPage(context);
    await demoTurn(page);
    await open(card(page, "run_cell", 1));
    const views = async (size, scheme) => {
      const tag = `${size.width}x${size.height}-${scheme}`;
      const check = async (view) => {
        report.push({ view, size: tag, findings: await assertAccessible(page, `${view} at ${tag}`) });
        await shot(page, `${view}-${tag}`);
      };
      if (size.width >= 1000) {
        await check("chat-and-notebook");
      } else {
        await page.click("#tab-chat");
        await check("chat");
        await page.click("#tab-notebook");
        await page.locator(".cell .out-plotly").scrollIntoViewIfNeeded();
        await check("notebook");
        await page.click("#tab-chat");
        await page.click("#menu");
        await page.waitForFunction(() => document.querySelector("#sidebar").getBoundingClientRect().left >= 0);
        await check("drawer");
        await page.keyboard.press("Escape");
        await page.waitForSelector("#sidebar", { state: "hidden" });
      }
    };
    for (const size of SIZES) {
      await page.setViewportSize({ width: size.width, height: size.height });
      for (const scheme of ["light", "dark"]) {
        await settle(page, scheme);
        if (size.width >= 1000) {
          // The chart is drawn in the page's colours, and restyled when the theme changes.
          await page.waitForFunction(() => {
            const plot = document.querySelector(".js-plotly-plot");
            return plot?._fullLayout?.font.color.replace(/\s/g, "") === getComputedStyle(document.body).color.replace(/\s/g, "")
              || plot?._fullLayout?.font.color === getComputedStyle(document.documentElement).getPropertyValue("--text").trim();
          });
          const c = await chartColours(page);
          assert.equal(c.paper.replace(/\s/g, ""), "rgba(0,0,0,0)");
          const light = rgb(c.font).reduce((a, b) => a + b, 0) > 382;
          assert.equal(light, scheme === "dark", `chart text ${c.font} in ${scheme}`);
          assert.equal(c.shareButtons, 0, "no Share chart button");
        }
        await views(size, scheme);
      }
    }
    // The delete dialog, on the phone in the dark.
    await page.click("#menu");
    await page.locator(".session-list li.current .session-delete").click();
    await page.waitForSelector("#confirm-dialog[open]");
    report.push({ view: "dialog", size: "390x844-dark", findings: await assertAccessible(page, "the delete dialog") });
    await shot(page, "dialog-390x844-dark");
    await page.keyboard.press("Escape");
    assert.deepEqual(page.errors, []);
  } finally {
    fs.writeFileSync(path.join(SHOTS, "axe-report.json"), JSON.stringify(report, null, 2));
    await context.close();
  }
});

// --- 6. provider errors -------------------------------------------------------------------
test("a provider error says what happened, in words, and Retry sends the message again", async () => {
  const context = await launch({ viewport: { width: 1024, height: 768 } });
  try {
    const session = await newSession("Overloaded", "overloaded.json");
    const page = await openPage(context, session.id);
    await send(page, "Summarise the sales");
    await waitTurnStatus(page, "failed");
    const error = lastTurn(page).locator(".block-error");
    const said = await error.innerText();
    assert.match(said, /^The model's provider is overloaded right now\./);
    assert.match(said, /It said: “Overloaded”\. This is usually temporary: try again in a moment\./);
    assert.ok(!/provider_status|retryable/.test(said), said);
    await shot(page, "provider-error");
    await error.getByRole("button", { name: "Retry: send this message again" }).click();
    await waitTurnStatus(page, "complete");
    assert.equal(await page.locator(".turn").count(), 2);
    assert.equal(await lastTurn(page).locator(".msg-user .msg-body").innerText(), "Summarise the sales");
    assert.equal(await lastTurn(page).locator(".block-text").innerText(), "Back again, and this time it worked.");
    assert.equal(await page.locator(".btn-retry").count(), 0, "only the last turn offers Retry");
    // After a reload the stored failure still reads in words.
    await page.reload();
    await page.waitForSelector(`body[data-session-id='${session.id}']`);
    assert.match(await page.locator(".turn").first().locator(".block-error").innerText(), /Overloaded/);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

// --- 7. the page's own dialog --------------------------------------------------------------
test("deleting a chat asks in the page's dialog, and Cancel keeps it", async () => {
  const context = await launch();
  try {
    const session = await newSession("Kept after all");
    const page = await openPage(context, session.id);
    const browserDialogs = [];
    page.on("dialog", (d) => {
      browserDialogs.push(d.type());
      d.dismiss();
    });
    await page.locator(".session-list li.current .session-delete").click();
    await page.waitForSelector("#confirm-dialog[open]");
    assert.match(await page.locator("#confirm-message").innerText(), /“Kept after all”.*cannot be undone/);
    await shot(page, "dialog-1440x900-light");
    await page.getByRole("button", { name: "Cancel" }).click();
    await page.waitForSelector("#confirm-dialog", { state: "hidden" });
    assert.ok((await api("/api/sessions")).sessions.some((s) => s.id === session.id));
    assert.deepEqual(browserDialogs, []);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
