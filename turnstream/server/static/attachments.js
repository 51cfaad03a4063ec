// Images and PDFs in messages: pasted or dropped into the composer (a chip each, removable until
// the message is sent, then sent as the message's `parts`), and shown in the chat (thumbnails
// and PDF chips, read from the session's stored blobs). Only these types are taken here; any
// other dropped or pasted file is left to whichever handler wants it.

import { api } from "./api.js";
import { h, toast } from "./dom.js";

export const MEDIA_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"]);

function base64(buffer) {
  const bytes = new Uint8Array(buffer);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function chipLabel(name, mediaType, size) {
  const kb = size < 1024 ? `${size} B` : `${Math.round(size / 1024)} KB`;
  return `${name || (mediaType === "application/pdf" ? "document.pdf" : "image")} (${kb})`;
}

// One attachment as the chat shows it: a thumbnail (an image) or a chip (a PDF). `url` is where
// its bytes are: an object URL, or a promise of one.
function attachmentNode({ name, media_type: mediaType, size }, url) {
  const label = chipLabel(name, mediaType, size);
  if (mediaType.startsWith("image/")) {
    const img = h("img", { class: "attachment-thumb", alt: name || "image" });
    Promise.resolve(url).then((u) => { if (u) img.src = u; });
    return h("figure", { class: "attachment attachment-image", title: label, "data-media-type": mediaType }, img);
  }
  const link = h("a", { class: "attachment attachment-file", text: `📄 ${label}`, target: "_blank", rel: "noopener",
    "data-media-type": mediaType });
  Promise.resolve(url).then((u) => { if (u) link.href = u; });
  return link;
}

// The attachments of a stored message or tool result: their bytes come from
// GET /api/sessions/{id}/blobs/{sha256} (with the key, so as object URLs).
export function storedAttachments(sessionId, attachments) {
  const row = h("div", { class: "attachments" });
  for (const a of attachments || []) {
    const url = api.raw(`/api/sessions/${sessionId}/blobs/${a.sha256}`)
      .then((r) => (r.ok ? r.blob() : null))
      .then((b) => (b ? URL.createObjectURL(b) : null))
      .catch(() => null);
    row.append(attachmentNode(a, url));
  }
  return row;
}

// Files the user picked for the next message, shown as chips above the composer.
export class ComposerAttachments {
  constructor(form, row) {
    this.row = row;
    this.items = []; // {file, url}
    form.addEventListener("paste", (e) => this.take(e, e.clipboardData));
    form.addEventListener("dragover", (e) => {
      if ([...(e.dataTransfer?.items || [])].some((i) => i.kind === "file" && MEDIA_TYPES.has(i.type))) {
        e.preventDefault();
      }
    });
    form.addEventListener("drop", (e) => this.take(e, e.dataTransfer));
  }

  take(e, transfer) {
    const files = [...(transfer?.files || [])].filter((f) => MEDIA_TYPES.has(f.type));
    if (!files.length) return; // text, or files for another handler
    e.preventDefault();
    for (const file of files) this.add(file);
  }

  add(file) {
    if (!MEDIA_TYPES.has(file.type)) {
      toast(`${file.name}: only PNG, JPEG, GIF, WebP images and PDFs can be sent in a message.`);
      return;
    }
    this.items.push({ file, url: URL.createObjectURL(file) });
    this.render();
  }

  remove(item) {
    this.items = this.items.filter((i) => i !== item);
    URL.revokeObjectURL(item.url);
    this.render();
  }

  render() {
    this.row.replaceChildren(...this.items.map((item) => {
      const { file } = item;
      const remove = h("button", { type: "button", class: "chip-remove", text: "×",
        "aria-label": `Remove ${file.name || "attachment"}`, onclick: () => this.remove(item) });
      return h("span", { class: "chip", "data-media-type": file.type },
        attachmentNode({ name: file.name, media_type: file.type, size: file.size }, item.url), remove);
    }));
    this.row.hidden = !this.items.length;
  }

  get count() {
    return this.items.length;
  }

  // The picked files as the turn route's `parts`, and as nodes for the sent message; the
  // composer is emptied (the object URLs now belong to the message shown).
  async takeAll() {
    const items = this.items;
    this.items = [];
    this.render();
    const parts = await Promise.all(items.map(async ({ file }) => ({
      type: file.type === "application/pdf" ? "file" : "image",
      media_type: file.type,
      data: base64(await file.arrayBuffer()),
      name: file.name || undefined,
    })));
    const row = h("div", { class: "attachments" },
      ...items.map(({ file, url }) => attachmentNode({ name: file.name, media_type: file.type, size: file.size }, url)));
    return { parts, row: items.length ? row : null, files: items.map((i) => i.file) };
  }

  // Puts files back (a message that could not be sent).
  restore(files) {
    for (const f of files) this.add(f);
  }
}
