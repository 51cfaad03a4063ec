// A server at capacity (issue 24): a new turn's POST answered 503 + Retry-After is retried by the
// page after the time asked, with "busy, retrying in N s" shown meanwhile. The 503s are played by
// Playwright's request routing in front of the real server (an overload cannot be made on demand);
// the third attempt reaches the server and the turn runs to its end.

import assert from "node:assert/strict";
import { test } from "node:test";
import { launch, newSession, openPage, send, waitTurnStatus } from "./support.mjs";

test("a 503 at capacity is retried after Retry-After, and the page says it is busy", async () => {
  const context = await launch();
  try {
    const session = await newSession("Busy server");
    const page = await openPage(context, session.id);
    let posts = 0;
    await page.route(`**/api/sessions/${session.id}/turns`, async (route) => {
      if (route.request().method() !== "POST") return route.continue();
      posts += 1;
      if (posts > 2) return route.continue();
      return route.fulfill({
        status: 503, headers: { "Retry-After": "1", "Content-Type": "application/json" },
        body: JSON.stringify({ error: "overloaded", message: "the server is at capacity" }),
      });
    });
    await send(page, "hello");
    await page.waitForSelector(".turn:last-of-type .busy-note");
    assert.match(await page.textContent(".turn:last-of-type .busy-note"), /busy; retrying in \d+ s/);
    await waitTurnStatus(page, "complete");
    assert.equal(posts, 3);
    assert.equal(await page.locator(".turn:last-of-type .busy-note").count(), 0);
    assert.equal(await page.locator(".turn:last-of-type .block-error").count(), 0);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
