// Browser tests of what a message may carry and when it may be sent: images and PDFs pasted or
// dropped into the composer, and a message sent while the turn runs (queued, then delivered).
// The running turn waits in `wait_for_gate` until the test writes to the FIFO that
// TURNSTREAM_TEST_GATE names (test_web.py starts the server with it): nothing is timed.

import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import { api, launch, lastTurn, newSession, openPage, send, shot, waitTurnStatus } from "./support.mjs";

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const PDF = Buffer.from("%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n").toString("base64");

// Files handed to the composer as the browser hands them over: a paste (clipboard) or a drop.
async function give(page, how, files) {
  await page.evaluate(({ how, files }) => {
    const dt = new DataTransfer();
    for (const f of files) {
      const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
      dt.items.add(new File([bytes], f.name, { type: f.type }));
    }
    const target = document.querySelector("#message");
    const ev = how === "paste"
      ? new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true })
      : new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true });
    target.dispatchEvent(ev);
  }, { how, files });
}

test("a pasted image and a dropped PDF are sent with the message and shown in it", async () => {
  const context = await launch();
  try {
    const session = await api("/api/sessions", { method: "POST", body: { title: "Attachments", model: "scripted:echo", toolset: "none" } });
    const page = await openPage(context, session.id);
    await give(page, "paste", [{ name: "dot.png", type: "image/png", b64: PNG }]);
    await give(page, "drop", [{ name: "notes.pdf", type: "application/pdf", b64: PDF },
      { name: "extra.png", type: "image/png", b64: PNG },
      { name: "data.csv", type: "text/csv", b64: btoa("a,b\n1,2\n") }]);
    const chips = page.locator("#attachment-chips .chip");
    assert.equal(await chips.count(), 3, "the CSV is not this handler's to take");
    await page.click("#attachment-chips button[aria-label='Remove extra.png']");
    assert.equal(await chips.count(), 2);
    await shot(page, "composer-attachments");
    await send(page, "What is in these?");
    await waitTurnStatus(page, "complete");
    assert.equal(await chips.count(), 0);
    const user = lastTurn(page).locator(".msg-user").first();
    assert.equal(await user.locator("img.attachment-thumb").count(), 1);
    assert.match(await user.locator(".attachment-file").textContent(), /notes\.pdf/);

    const stored = await api(`/api/sessions/${session.id}`);
    const block = stored.turns[0].blocks.find((b) => b.type === "user");
    assert.deepEqual(block.attachments.map((a) => [a.name, a.media_type]), [["dot.png", "image/png"], ["notes.pdf", "application/pdf"]]);

    // After a reload the thumbnail is drawn from the session's stored blob.
    await page.reload();
    await page.waitForSelector("body[data-ready='true']");
    await page.waitForFunction(() => {
      const img = document.querySelector(".turn .msg-user img.attachment-thumb");
      return img && img.complete && img.naturalWidth === 1 && img.src.startsWith("blob:");
    });
    assert.match(await lastTurn(page).locator(".msg-user .attachment-file").first().textContent(), /notes\.pdf/);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a message sent while the turn runs is shown queued, then delivered at the next step", async () => {
  const context = await launch();
  try {
    const session = await newSession("Queued", "gate.json");
    const page = await openPage(context, session.id);
    await send(page, "Wait at the gate");
    await page.waitForSelector(".turn:last-of-type .block-tool[aria-label='Tool call wait_for_gate'][data-state='running']");
    assert.equal(await page.locator("#send").isDisabled(), false, "the composer stays usable while the turn runs");
    await send(page, "Use metric units, please");
    const queued = lastTurn(page).locator(".block-queued[data-state='queued']");
    await queued.waitFor();
    assert.match(await queued.textContent(), /Use metric units, please/);
    assert.equal(await page.locator(".turn").count(), 1, "no new turn for a queued message");
    await shot(page, "message-queued");

    fs.writeFileSync(process.env.TURNSTREAM_TEST_GATE, "open"); // the tool reads it and the turn goes on
    await waitTurnStatus(page, "complete");
    const delivered = lastTurn(page).locator(".block-user[data-state='delivered']");
    assert.equal(await delivered.count(), 1);
    assert.match(await delivered.textContent(), /Use metric units, please/);
    assert.equal(await lastTurn(page).locator(".block-queued").count(), 0);
    // It came after the tool's result, before the answer of the step that read it.
    const order = await lastTurn(page).evaluate((t) =>
      [...t.querySelectorAll(".msg-assistant > .block:not([hidden])")].map((b) => [...b.classList].find((c) => c.startsWith("block-") && c !== "block-user") ?? "block-user"));
    assert.deepEqual(order.slice(-2), ["block-user", "block-text"]);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("a message sent while a call waits for approval denies it, with the message as the reason", async () => {
  const context = await launch();
  try {
    const session = await newSession("Denied by a message", "approval.json");
    const page = await openPage(context, session.id);
    await send(page, "Add a scratch cell, then delete it");
    const card = page.locator(".turn:last-of-type .block-tool[aria-label='Tool call delete_cell']");
    await card.getByRole("button", { name: "Approve delete_cell" }).waitFor();
    await waitTurnStatus(page, "awaiting_client");
    await send(page, "No, keep that cell");
    const denied = lastTurn(page).locator(".block-queued[data-state='denied']");
    await denied.waitFor();
    assert.match(await denied.textContent(), /No, keep that cell.*reason for denying/);
    await waitTurnStatus(page, "complete");
    assert.equal(await card.getAttribute("data-state"), "denied");
    assert.match(await card.locator(".tool-result").textContent(), /No, keep that cell/);
    assert.equal(await page.locator(".cell").count(), 1, "the denied delete keeps the cell");
    assert.equal(await page.locator(".turn").count(), 1);
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test("an image a tool returns is shown under its card, live and after a reload", async () => {
  const context = await launch();
  try {
    const session = await newSession("Tool image", "tool_image.json");
    const page = await openPage(context, session.id);
    await send(page, "Look at the screen");
    await waitTurnStatus(page, "complete");
    const drawn = () => page.waitForFunction(() => {
      const img = document.querySelector(".turn .block-tool[aria-label='Tool call snapshot'] .tool-media img.attachment-thumb");
      return img && img.complete && img.naturalWidth === 1 && img.src.startsWith("blob:");
    });
    await drawn();
    const card = lastTurn(page).locator(".block-tool[aria-label='Tool call snapshot']");
    assert.equal(await card.locator("details").getAttribute("open"), null, "shown with the card closed");
    assert.equal(await card.locator(".tool-media figure").getAttribute("data-media-type"), "image/gif");
    await shot(page, "tool-image");

    await page.reload();
    await page.waitForSelector("body[data-ready='true']");
    await drawn(); // from the session's stored blob
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});
