// Download the notebook as .ipynb (GET …/notebook.ipynb, read with the key and saved through a
// link) and import one into an empty notebook (POST …/notebook.ipynb); in a new chat, Import
// creates the chat first.

import { api } from "./api.js";
import { refusal } from "./datafiles.js";
import { $, announce, toast } from "./dom.js";

export class Ipynb {
  constructor(app) {
    this.app = app;
    const picker = $("#nb-import-input");
    $("#nb-download").addEventListener("click", () => this.download());
    $("#nb-import").addEventListener("click", () => picker.click());
    picker.addEventListener("change", () => {
      const file = picker.files[0];
      picker.value = "";
      if (file) this.import(file);
    });
  }

  url() {
    return `/api/sessions/${encodeURIComponent(this.app.chat.sessionId)}/notebook.ipynb`;
  }

  async download() {
    const resp = await api.raw(this.url());
    if (!resp.ok) {
      toast(`No download: ${await refusal(resp)}`);
      return;
    }
    const name = /filename="([^"]+)"/.exec(resp.headers.get("content-disposition") || "")?.[1] || "notebook.ipynb";
    const link = document.createElement("a");
    link.href = URL.createObjectURL(await resp.blob());
    link.download = name;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  }

  async import(file) {
    if (this.app.notebook.cells.size > 0) {
      toast("Import goes into an empty notebook: start a new chat (or delete this one's cells) first.", "info");
      return;
    }
    if (!(await this.app.ensureSession())) return; // a new chat's Import creates the chat
    const resp = await fetch(this.url(), { method: "POST", body: await file.text(),
      headers: api.headers({ "Content-Type": "application/x-ipynb+json" }) });
    if (!resp.ok) {
      toast(`Not imported: ${await refusal(resp)}`);
      return;
    }
    const { cells } = await resp.json();
    this.app.notebook.setState(cells);
    announce(`Imported ${cells.length} cells from ${file.name}`);
  }
}
