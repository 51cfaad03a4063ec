// What the browser test files share: launching Debian's Chromium (a fresh profile each time),
// the API of the server under test, opening the page as a user does, waiting on what the page
// shows, screenshots, and axe-core (pinned in package-lock.json) run inside the page.
//
//   TURNSTREAM_URL=http://127.0.0.1:8000 TURNSTREAM_KEY=... node --test web.test.mjs
//
// tests/e2e/web/test_web.py starts the server (SQLite in a temporary folder, the offline demo
// model) and runs the files, one test at a time. Nothing here waits for a fixed time: each step
// waits for something the page shows.

import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const BASE = (process.env.TURNSTREAM_URL || "http://127.0.0.1:8000").replace(/\/$/, "");
export const KEY = process.env.TURNSTREAM_KEY || "";
export const SHOTS = process.env.SCREENSHOT_DIR || path.resolve(HERE, "../screenshots");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
export const SCENARIOS = path.join(HERE, "scenarios");
const ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];
export const TURN_TIMEOUT = 60_000;
const AXE = fs.readFileSync(path.join(HERE, "node_modules", "axe-core", "axe.min.js"), "utf8");

fs.mkdirSync(SHOTS, { recursive: true });
const profiles = [];

before(() => {
  assert.ok(KEY, "TURNSTREAM_KEY must hold an API key of the server under test");
});

after(() => {
  for (const dir of profiles) fs.rmSync(dir, { recursive: true, force: true });
});

export async function launch({ viewport = { width: 1440, height: 900 }, colorScheme = "light" } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "turnstream-chromium-"));
  profiles.push(dir);
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport,
    colorScheme,
  });
  context.setDefaultTimeout(TURN_TIMEOUT);
  return context;
}

export async function api(pathname, { method = "GET", body } = {}) {
  const resp = await fetch(BASE + pathname, {
    method,
    headers: { Authorization: `Bearer ${KEY}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await resp.text();
  assert.ok(resp.ok, `${method} ${pathname}: ${resp.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

export async function newSession(title, scenario = null) {
  const body = { title, toolset: "notebook" };
  if (scenario) body.model = `scripted:${path.join(SCENARIOS, scenario)}`;
  return api("/api/sessions", { method: "POST", body });
}

// Opens the page the way a user does: the address `turnstream serve` prints, with the key.
export async function openPage(context, sessionId) {
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (err) => errors.push(err));
  page.errors = errors;
  await page.goto(`${BASE}/#key=${encodeURIComponent(KEY)}${sessionId ? `&session=${sessionId}` : ""}`);
  await page.waitForSelector("body[data-ready='true']");
  if (sessionId) await page.waitForSelector(`body[data-session-id='${sessionId}']`);
  return page;
}

export async function send(page, text) {
  await page.fill("#message", text);
  await page.press("#message", "Enter");
}

export function lastTurn(page) {
  return page.locator(".turn").last();
}

export async function waitTurnStatus(page, status) {
  await page.waitForSelector(`.turn:last-of-type[data-status='${status}']`);
}

export async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false });
}

// The kinds and indexes of the last turn's blocks, in page order.
export async function blockOrder(page) {
  return lastTurn(page).evaluate((turn) =>
    [...turn.querySelectorAll(".msg-assistant > .block:not([hidden])")].map((b) => ({
      index: Number(b.dataset.index),
      kind: [...b.classList].find((c) => c.startsWith("block-")),
      name: b.querySelector(".tool-name")?.textContent ?? null,
      text: b.textContent.trim().slice(0, 80),
    })));
}

// axe-core's findings on the page as it is now (WCAG 2.x A and AA rules, best practices), with
// the impact of each; the script is evaluated through the DevTools protocol, which the page's
// Content-Security-Policy does not govern (the page itself allows no inline script).
export async function axe(page) {
  await page.evaluate(AXE);
  return page.evaluate(async () => {
    const result = await window.axe.run(document, {
      runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"] },
      resultTypes: ["violations"],
    });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(" ")}: ${n.failureSummary?.split("\n").slice(0, 3).join(" ")}`) }));
  });
}

// Fails on a serious or critical axe violation; returns every finding (for the report).
export async function assertAccessible(page, where) {
  const found = await axe(page);
  const bad = found.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(bad, [], `axe-core on ${where}: ${JSON.stringify(bad, null, 2)}`);
  return found;
}
