// The notebook's data files: the list under the notebook's toolbar (with Delete), and uploads
// (multipart, POST …/notebook/files) from the Upload button, a drop on the notebook pane, or the
// chat: a file attached to or dropped on the composer is uploaded the same way and the message box
// is filled with a line telling the assistant it is there (name, rows, columns).
// The list follows {"type": "notebook_files", "files"} from the session's WebSocket.

import { api, errorText } from "./api.js";
import { confirmDialog } from "./dialog.js";
import { $, announce, h, toast } from "./dom.js";
import { MEDIA_TYPES } from "./attachments.js";

export const DATA_SUFFIXES = [".csv", ".tsv", ".parquet", ".json", ".xlsx"];

function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function shape(f) {
  return f.rows === null || f.rows === undefined ? f.format : `${f.rows} rows × ${f.columns.length} columns`;
}

// Why the server refused a request, in its own words: the first detail's message (a 422 names
// the file: "x.csv is not CSV: it holds binary data"), else the message, never raw JSON.
export async function refusal(resp) {
  try {
    const body = await resp.clone().json();
    const said = body?.detail?.[0]?.msg ?? body?.message;
    if (typeof said === "string" && said) return said;
  } catch {
    /* not JSON: the generic text below */
  }
  return errorText(resp);
}

// The line the chat's message box gets after an upload.
export function uploadMessage(files) {
  const parts = files.map((f) => {
    const cols = f.columns ? `; columns ${f.columns.join(", ")}` : "";
    const rows = f.rows === null || f.rows === undefined ? f.format : `${f.rows} rows`;
    return `${f.name} (${rows}${cols}), loaded as \`${f.variable}\``;
  });
  return `I uploaded ${parts.join(" and ")} to the notebook. Analyse it and chart it.`;
}

export class DataFiles {
  constructor(app) {
    this.app = app;
    this.list = $("#data-files");
    this.picker = $("#nb-file-input");
    this.picker.accept = DATA_SUFFIXES.join(",");
    $("#nb-upload").addEventListener("click", () => this.picker.click());
    this.picker.addEventListener("change", () => this.fromPicker(this.picker, false));
    const attach = $("#attach-input");
    attach.accept = DATA_SUFFIXES.join(",");
    $("#attach").addEventListener("click", () => attach.click());
    attach.addEventListener("change", () => this.fromPicker(attach, true));
    this.dropZone($("#notebook"), false);
    this.dropZone($("#chat"), true);
  }

  fromPicker(input, chat) {
    const files = [...input.files];
    input.value = "";
    if (files.length) this.upload(files, { chat });
  }

  dropZone(pane, chat) {
    const has = (e) => [...(e.dataTransfer?.types || [])].includes("Files");
    pane.addEventListener("dragover", (e) => {
      if (!has(e)) return;
      e.preventDefault();
      e.dataTransfer.dropEffect = "copy";
      pane.classList.add("drop-target");
    });
    pane.addEventListener("dragleave", (e) => {
      if (!pane.contains(e.relatedTarget)) pane.classList.remove("drop-target");
    });
    pane.addEventListener("drop", (e) => {
      if (!has(e)) return;
      e.preventDefault();
      pane.classList.remove("drop-target");
      // On the chat, images and PDFs go with the message (attachments.js); data files go here.
      const files = [...e.dataTransfer.files].filter((f) => !chat || !MEDIA_TYPES.has(f.type));
      if (files.length) this.upload(files, { chat });
    });
  }

  // Uploads `files` into the open chat's notebook (a draft chat is created first); from the chat,
  // the message box then says what was uploaded. Resolves to the stored files' list (or null).
  async upload(files, { chat = false } = {}) {
    if (!(await this.app.ensureSession())) return null;
    const form = new FormData();
    for (const f of files) form.append("files", f, f.name);
    let resp;
    try {
      resp = await fetch(`/api/sessions/${encodeURIComponent(this.app.chat.sessionId)}/notebook/files`,
        { method: "POST", headers: api.headers(), body: form });
    } catch (err) {
      toast(`The upload failed: ${err.message}`);
      return null;
    }
    if (!resp.ok) {
      toast(`Not uploaded: ${await refusal(resp)}`);
      return null;
    }
    const stored = (await resp.json()).files;
    announce(`Uploaded ${stored.map((f) => f.name).join(", ")}`);
    await this.refresh();
    if (chat) {
      const input = this.app.chat.input;
      input.value = uploadMessage(stored);
      this.app.chat.autosize();
      this.app.layout.show("chat");
      input.focus();
    }
    return stored;
  }

  async refresh() {
    const sid = this.app.chat.sessionId;
    if (!sid) return this.show([]);
    try {
      this.show((await api.json(`/api/sessions/${encodeURIComponent(sid)}/notebook/files`)).files);
    } catch (err) {
      toast(`Could not list the data files: ${err.message}`);
    }
  }

  show(files) {
    this.list.hidden = !files?.length;
    this.list.replaceChildren(...(files || []).map((f) => h("li", { class: "data-file", "data-name": f.name },
      h("span", { class: "data-file-name", text: f.name }),
      h("span", { class: "muted", text: `${shape(f)}, ${size(f.bytes)} · \`${f.variable}\`` }),
      h("button", { type: "button", class: "btn btn-small btn-ghost data-file-delete", text: "✕",
        "aria-label": `Delete the file ${f.name}`, title: `Delete the file ${f.name}`,
        onclick: () => this.remove(f.name) }))));
  }

  async remove(name) {
    const ok = await confirmDialog({ title: `Delete ${name}?`,
      message: "Cells that read it will fail on their next run.", confirm: "Delete" });
    if (!ok) return;
    const sid = this.app.chat.sessionId;
    try {
      await api.json(`/api/sessions/${encodeURIComponent(sid)}/notebook/files/${encodeURIComponent(name)}`,
        { method: "DELETE" });
    } catch (err) {
      if (err.status !== 404) toast(`Not deleted: ${err.message}`);
    }
    await this.refresh();
    $("#nb-upload").focus();
  }
}
