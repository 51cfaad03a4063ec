// The notebook pane: one card per cell (its editor, controls, status, execution count and
// outputs), kept in step with the server's WebSocket messages:
//   {"type": "notebook_state", "version", "cells": [cell, ...], "sandbox"}   the whole notebook
//   {"type": "notebook", "version", "change", "cell", "index"?}                one change
// where change is cell_created | cell_updated | cell_moved | cell_deleted | cell_status |
// cell_output, and sandbox.warning (when set) says that cells run unsandboxed or cannot run.
//
// The user's edits go through the notebook routes (docs/notebook.md). An edit is saved a moment
// after the typing stops, as PATCH with `base_code` (the code the user started from); a 409
// edit_conflict, or a change from the assistant or another tab to a cell the user is editing,
// shows both versions and lets the user keep theirs or take the other, instead of overwriting.
// Cells the user is not editing follow every change live.

import { api } from "./api.js";
import { confirmDialog } from "./dialog.js";
import { announce, h, toast } from "./dom.js";
import { createEditor } from "./editor.js";
import { renderOutput } from "./outputs.js";

const SAVE_DELAY_MS = 400; // quiet typing before an edit is saved
const STARTERS = new Set(["nb-add", "nb-upload", "nb-import"]); // toolbar buttons that may start a chat
const LANGUAGES = { python: "Python", sql: "SQL" };

// A route's answer as {ok, status, body}, so a 409's body (the cell as it is now) can be read.
async function call(path, method, body) {
  const resp = await api.raw(path, { method, body });
  let data = null;
  try {
    data = await resp.json();
  } catch {
    /* an empty or non-JSON body */
  }
  return { ok: resp.ok, status: resp.status, body: data };
}

function failure(what, res) {
  const why = res.body?.message || res.body?.error || `HTTP ${res.status}`;
  toast(`${what}: ${why}`);
}

export class NotebookView {
  constructor(root, { onStatus, onPlaces, ensureSession } = {}) {
    this.root = root;
    this.list = root.querySelector(".cells");
    this.empty = root.querySelector(".notebook-empty");
    this.counter = root.querySelector(".notebook-count");
    this.warning = root.querySelector(".sandbox-warning");
    this.addButton = root.querySelector("#nb-add");
    this.runAllButton = root.querySelector("#nb-run-all");
    this.restartButton = root.querySelector("#nb-restart");
    this.restartRunButton = root.querySelector("#nb-restart-run");
    this.onStatus = onStatus || (() => {});
    this.onPlaces = onPlaces || (() => {}); // the cells' places may have changed
    this.ensureSession = ensureSession || (async () => this.sessionId); // creates a draft chat
    this.cells = new Map(); // id -> entry {id, data, node, editor, base, sending, timer, saving, theirs}
    this.version = -1;
    this.sessionId = null;
    this.addButton.addEventListener("click", () => this.addCell(this.cells.size));
    this.runAllButton.addEventListener("click", () => this.runAll());
    this.restartButton.addEventListener("click", () => this.restart(false));
    this.restartRunButton.addEventListener("click", () => this.restart(true));
    this.open(null);
  }

  // The session whose notebook this is (null: a new chat, not created yet). + Cell, Upload data
  // and Import work in a new chat too (each creates it); what needs cells waits for them.
  open(sessionId) {
    this.clear();
    this.sessionId = sessionId;
    for (const b of this.root.querySelectorAll(".notebook-toolbar button")) {
      b.disabled = !sessionId && !STARTERS.has(b.id);
    }
  }

  url(path = "") {
    return `/api/sessions/${encodeURIComponent(this.sessionId)}/notebook${path}`;
  }

  clear() {
    for (const entry of this.cells.values()) this.dispose(entry);
    this.cells.clear();
    this.list.replaceChildren();
    this.version = -1;
    this.refreshEmpty();
  }

  setState(cells, version) {
    const seen = new Set();
    cells.forEach((cell, i) => {
      seen.add(cell.id);
      this.upsert(cell, i);
    });
    for (const id of [...this.cells.keys()]) if (!seen.has(id)) this.remove(id);
    if (version !== undefined) this.version = version;
    this.refreshEmpty();
  }

  apply(msg) {
    if (msg.type === "notebook_state") {
      this.setState(msg.cells || [], msg.version);
      this.showSandbox(msg.sandbox);
      return;
    }
    if (msg.type !== "notebook") return;
    if (msg.version !== undefined && msg.version <= this.version) return; // already applied
    const cell = msg.cell || {};
    if (msg.change === "cell_deleted") this.remove(cell.id);
    else {
      this.upsert(cell, msg.index);
      // Bring the cell being worked on into view (no jump when it is visible, none while typing).
      const typing = this.root.contains(document.activeElement) && document.activeElement !== document.body;
      if (!typing && (msg.change === "cell_created" || msg.change === "cell_output" || cell.status === "running")) {
        this.cells.get(cell.id)?.node.scrollIntoView({ block: "nearest" });
      }
    }
    if (msg.version !== undefined) this.version = msg.version;
    this.refreshEmpty();
    this.onStatus(msg);
  }

  // A line above the cells when kernels run without a sandbox, or cannot run at all.
  showSandbox(sandbox) {
    if (!this.warning) return;
    const text = sandbox?.warning || "";
    this.warning.textContent = text;
    this.warning.hidden = !text;
  }

  order() {
    return [...this.list.children].map((n) => n.dataset.cellId);
  }

  // The count, and each cell's place in the names of the cell and its controls ("Run cell 2").
  refreshEmpty() {
    const n = this.cells.size;
    this.empty.hidden = n > 0;
    if (this.counter) this.counter.textContent = n ? `${n} cell${n === 1 ? "" : "s"}` : "";
    this.runAllButton.disabled = !this.sessionId || n === 0;
    [...this.list.children].forEach((node, i) => {
      const entry = this.cells.get(node.dataset.cellId);
      if (entry) this.label(entry, i + 1, n);
    });
    this.onPlaces();
  }

  remove(id) {
    const entry = this.cells.get(id);
    if (!entry) return;
    this.dispose(entry);
    entry.node.remove();
    this.cells.delete(id);
  }

  dispose(entry) {
    clearTimeout(entry.timer);
    entry.editor.destroy();
  }

  upsert(cell, index) {
    let entry = this.cells.get(cell.id);
    if (!entry) {
      entry = this.build(cell);
      this.cells.set(cell.id, entry);
      const before = Number.isInteger(index) ? this.list.children[index] : null;
      this.list.insertBefore(entry.node, before || null);
      entry.node.classList.add("cell-new");
      entry.node.addEventListener("animationend", () => entry.node.classList.remove("cell-new"), { once: true });
    } else if (Number.isInteger(index) && this.list.children[index] !== entry.node) {
      const focused = entry.node.contains(document.activeElement) ? document.activeElement : null;
      entry.node.remove();
      this.list.insertBefore(entry.node, this.list.children[index] || null);
      focused?.focus();
    }
    const prev = entry.data;
    entry.data = { ...prev, ...cell };
    this.fill(entry, prev);
    if (typeof cell.code === "string") this.codeArrived(entry, cell);
    this.refreshEmpty(); // names and places follow the change
  }

  // --- one cell's card ----------------------------------------------------------------------
  build(cell) {
    const node = h("article", { class: "cell", "data-cell-id": cell.id, tabindex: "0" });
    const button = (cls, text, onclick) => h("button", { type: "button", class: `btn btn-small btn-ghost ${cls}`, text, onclick });
    const entry = { id: cell.id, data: {}, node, base: cell.code ?? "", sending: null, timer: null,
      saving: Promise.resolve(true), theirs: null, applying: false };
    const lang = h("select", { class: "cell-lang", "aria-label": "Language" },
      ...Object.entries(LANGUAGES).map(([value, text]) => h("option", { value, text })));
    lang.addEventListener("change", () => this.setLanguage(entry, lang.value));
    const controls = {
      run: button("cell-run", "▶", () => this.run(entry)),
      interrupt: button("cell-interrupt", "■", () => this.interrupt(entry)),
      up: button("cell-up", "↑", () => this.move(entry, -1)),
      down: button("cell-down", "↓", () => this.move(entry, 1)),
      above: button("cell-add-above", "+↑", () => this.addCell(this.order().indexOf(entry.id), entry.data.language)),
      below: button("cell-add-below", "+↓", () => this.addCell(this.order().indexOf(entry.id) + 1, entry.data.language)),
      delete: button("cell-delete", "✕", () => this.delete(entry)),
    };
    entry.controls = controls;
    const tools = h("div", { class: "cell-tools", role: "group" }, ...Object.values(controls));
    node.append(
      h("header", { class: "cell-head" },
        h("span", { class: "cell-count" }), lang, h("span", { class: "cell-id", text: `#${cell.id}` }),
        h("span", { class: "badge", role: "status" }), tools),
      h("div", { class: "cell-editor" }),
      h("p", { class: "cell-hint", id: `cell-hint-${cell.id}`, hidden: true }),
      h("div", { class: "cell-conflict", role: "alert", hidden: true }),
      h("div", { class: "cell-outputs", "aria-live": "polite" }),
    );
    entry.editor = createEditor({
      parent: node.querySelector(".cell-editor"),
      doc: entry.base,
      language: cell.language || "python",
      label: "Code",
      onChange: () => this.edited(entry),
      onKey: (name) => this.key(entry, name),
    });
    // Tab stops on the card, never in the editor: Enter on the card (or a click) edits the code,
    // Escape in the editor comes back to the card. The hint under the editor says which is which.
    node.addEventListener("keydown", (e) => {
      if (e.target === node && e.key === "Enter") {
        e.preventDefault();
        entry.editor.focus();
      }
    });
    const hint = node.querySelector(".cell-hint");
    const showHint = () => {
      const editing = entry.editor.contentElement.contains(document.activeElement);
      hint.hidden = !editing && document.activeElement !== node;
      hint.textContent = editing
        ? "Editing: Tab indents, Escape leaves the editor, Shift+Enter runs the cell."
        : "Enter edits the code; Tab moves on to the cell's buttons.";
    };
    node.addEventListener("focusin", showHint);
    node.addEventListener("focusout", () => queueMicrotask(showHint));
    node.setAttribute("aria-describedby", hint.id);
    entry.editor.contentElement.setAttribute("aria-describedby", hint.id);
    return entry;
  }

  label(entry, place, total) {
    const d = entry.data;
    const status = d.status || "idle";
    entry.node.setAttribute("aria-label", `Cell ${place}, ${LANGUAGES[d.language] || "Python"}, ${status}`);
    entry.editor.contentElement.setAttribute("aria-label", `Code of cell ${place}`);
    const c = entry.controls;
    const names = {
      run: `Run cell ${place} (Ctrl+Enter)`, interrupt: `Interrupt cell ${place}`, up: `Move cell ${place} up`,
      down: `Move cell ${place} down`, above: `Add a cell above cell ${place}`,
      below: `Add a cell below cell ${place}`, delete: `Delete cell ${place}`,
    };
    for (const [k, name] of Object.entries(names)) {
      c[k].setAttribute("aria-label", name);
      c[k].title = name;
    }
    entry.node.querySelector(".cell-lang").setAttribute("aria-label", `Language of cell ${place}`);
    c.up.disabled = place === 1;
    c.down.disabled = place === total;
  }

  fill(entry, prev) {
    const { node, data: cell } = entry;
    const status = cell.status || "idle";
    node.dataset.status = status;
    const running = status === "running" || status === "waiting";
    node.querySelector(".cell-count").textContent = running ? "[*]" : `[${cell.execution_count ?? " "}]`;
    node.querySelector(".cell-count").title = "Execution count";
    const lang = node.querySelector(".cell-lang");
    if (lang.value !== (cell.language || "python")) lang.value = cell.language || "python";
    if (prev.language !== undefined && prev.language !== cell.language) entry.editor.setLanguage(cell.language || "python");
    const badge = node.querySelector(".badge");
    const [kind, text, title] = this.badge(cell, status);
    badge.className = `badge badge-${kind}`;
    badge.textContent = text;
    badge.title = title;
    node.dataset.previous = String(Boolean(cell.previous_kernel));
    const { run, interrupt } = entry.controls;
    // Run and Interrupt share a place; the focus follows when one replaces the other.
    const had = document.activeElement;
    run.hidden = running;
    interrupt.hidden = !running;
    if (had === run && running) interrupt.focus();
    else if (had === interrupt && !running) run.focus();
    if (cell.outputs && JSON.stringify(prev.outputs) !== JSON.stringify(cell.outputs)) {
      node.querySelector(".cell-outputs").replaceChildren(...cell.outputs.map(renderOutput));
    }
  }

  // A cell's state in words: [badge kind, text, title].
  badge(cell, status) {
    const up = cell.blocked_by;
    if (status === "waiting" && up) return ["waiting", `waiting for #${up}`, `cell ${up} runs first`];
    if (status === "blocked" && up) {
      if (this.cells.get(up)?.data.interrupted) {
        const text = `waits on #${up}, which was interrupted: run or edit it`;
        return ["blocked", text, text];
      }
      return ["blocked", `blocked by #${up}`, `blocked by cell ${up}`];
    }
    if (cell.previous_kernel && status !== "running") {
      return ["previous", `${status} · previous kernel`,
        "The kernel was restarted since this ran: its names are gone until it runs again"];
    }
    return [status, status, ""];
  }

  // --- edits and conflicts ------------------------------------------------------------------
  editing(entry) {
    return entry.editor.hasFocus() || entry.editor.getCode() !== entry.base;
  }

  // The server's code for a cell: shown at once unless the user is editing it.
  codeArrived(entry, cell) {
    const code = cell.code;
    const mine = entry.editor.getCode();
    if (code === mine) {
      entry.base = code;
      this.hideConflict(entry);
      return;
    }
    if (code === entry.base || code === entry.sending) return; // what the user started from, or their own save
    if (this.editing(entry)) {
      this.showConflict(entry, code, cell.edited_by);
      return;
    }
    this.setCode(entry, code);
    entry.base = code;
  }

  setCode(entry, code) {
    entry.applying = true;
    try {
      entry.editor.setCode(code);
    } finally {
      entry.applying = false;
    }
  }

  edited(entry) {
    if (entry.applying) return;
    clearTimeout(entry.timer);
    entry.timer = setTimeout(() => this.save(entry), SAVE_DELAY_MS);
  }

  // Saves the editor's code (one save at a time per cell); resolves to whether the server has it.
  save(entry) {
    clearTimeout(entry.timer);
    entry.timer = null;
    const prior = entry.saving;
    entry.saving = prior.then(async () => {
      const code = entry.editor.getCode();
      if (code === entry.base) return true;
      if (entry.theirs !== null) return false; // waits for the user's choice
      entry.sending = code;
      try {
        const res = await call(this.url(`/cells/${entry.id}`), "PATCH", { code, base_code: entry.base });
        if (res.ok) {
          entry.base = code;
          const prev = entry.data;
          entry.data = { ...prev, ...res.body };
          this.fill(entry, prev);
          return true;
        }
        if (res.status === 409 && res.body?.cell) {
          this.showConflict(entry, res.body.cell.code, res.body.cell.edited_by);
        } else failure("The cell was not saved", res);
        return false;
      } catch (err) {
        toast(`The cell was not saved: ${err.message}`);
        return false;
      } finally {
        entry.sending = null;
      }
    });
    return entry.saving;
  }

  showConflict(entry, theirs, by) {
    entry.theirs = theirs;
    const who = by === "assistant" ? "The assistant" : "Someone else (another tab)";
    const box = entry.node.querySelector(".cell-conflict");
    box.replaceChildren(
      h("p", { class: "conflict-title", text: `${who} changed this cell while you were editing it. Its version:` }),
      h("pre", { class: "conflict-theirs", text: theirs }),
      h("div", { class: "conflict-actions" },
        h("button", { type: "button", class: "btn btn-small btn-primary conflict-keep", text: "Keep mine",
          onclick: () => this.keepMine(entry) }),
        h("button", { type: "button", class: "btn btn-small conflict-take", text: "Take theirs",
          onclick: () => this.takeTheirs(entry) })),
    );
    box.hidden = false;
    entry.node.classList.add("cell-conflicted");
    announce(`${who} changed a cell you are editing`);
  }

  hideConflict(entry) {
    entry.theirs = null;
    const box = entry.node.querySelector(".cell-conflict");
    box.hidden = true;
    box.replaceChildren();
    entry.node.classList.remove("cell-conflicted");
  }

  // Saves the user's code over the other version (conditional on that version, so a third
  // change in between is a conflict again).
  async keepMine(entry) {
    entry.base = entry.theirs;
    this.hideConflict(entry);
    const saved = await this.save(entry);
    if (saved) entry.editor.focus();
  }

  takeTheirs(entry) {
    const theirs = entry.theirs;
    this.hideConflict(entry);
    this.setCode(entry, theirs);
    entry.base = theirs;
    entry.editor.focus();
  }

  async setLanguage(entry, language) {
    const res = await call(this.url(`/cells/${entry.id}`), "PATCH", { language });
    if (res.ok) this.upsert(res.body);
    else failure("The language was not changed", res);
  }

  // --- running ------------------------------------------------------------------------------
  key(entry, name) {
    if (name === "leave") {
      entry.node.focus();
      return true;
    }
    this.run(entry);
    if (name === "run-next") {
      const place = this.order().indexOf(entry.id) + 1;
      const next = this.cells.get(this.order()[place]);
      if (next) next.editor.focus();
      else {
        // The last cell: a new one below takes what the user types next (as in Jupyter); until it
        // is there, the focus waits on the card, where a key changes nothing.
        entry.node.focus();
        this.addCell(place, entry.data.language);
      }
    }
    return true;
  }

  // Saves, then runs the cell; resolves to the cell after the run (null when it did not run).
  async run(entry) {
    if (!(await this.save(entry))) {
      toast("The cell did not run: its code is not saved (see the cell).", "info");
      return null;
    }
    try {
      const res = await call(this.url(`/cells/${entry.id}/run`), "POST");
      if (!res.ok) {
        failure("The cell did not run", res);
        return null;
      }
      if (this.cells.has(entry.id)) this.upsert(res.body.cell);
      return res.body.cell;
    } catch (err) {
      toast(`The cell did not run: ${err.message}`);
      return null;
    }
  }

  // Runs every cell in order, stopping at the first that does not succeed.
  async runAll() {
    this.runAllButton.disabled = true;
    try {
      for (const id of this.order()) {
        const entry = this.cells.get(id);
        if (!entry) continue;
        const cell = await this.run(entry);
        if (!cell || cell.status !== "success") break;
      }
    } finally {
      this.runAllButton.disabled = this.cells.size === 0;
    }
  }

  // Restarts the kernel (after the page's own confirmation), then runs every cell when asked.
  async restart(runAll) {
    const ok = await confirmDialog({
      title: runAll ? "Restart the kernel and run all cells?" : "Restart the kernel?",
      message: "Every variable and import in the kernel goes; the cells and their code stay. "
        + (runAll ? "Then every cell runs in order, stopping at the first that fails." : "Run the cells again to get them back."),
      confirm: runAll ? "Restart and run all" : "Restart",
    });
    if (!ok) return;
    const buttons = [this.restartButton, this.restartRunButton, this.runAllButton];
    for (const b of buttons) b.disabled = true;
    try {
      const res = await call(this.url("/restart"), "POST", { run_all: runAll });
      if (!res.ok) failure("The kernel was not restarted", res);
      else {
        this.setState(res.body.cells || [], res.body.version);
        announce(runAll ? `Kernel restarted; ${res.body.ran.length} cells ran` : "Kernel restarted");
      }
    } catch (err) {
      toast(`The kernel was not restarted: ${err.message}`);
    } finally {
      for (const b of buttons) b.disabled = !this.sessionId;
      this.refreshEmpty();
    }
  }

  async interrupt(entry) {
    const res = await call(this.url(`/cells/${entry.id}/interrupt`), "POST");
    if (!res.ok) failure("Could not interrupt the cell", res);
  }

  // --- adding, moving, deleting -------------------------------------------------------------
  async addCell(index, language = "python") {
    if (!(await this.ensureSession())) return;
    const res = await call(this.url("/cells"), "POST", { code: "", language: language || "python", index });
    if (!res.ok) {
      failure("The cell was not added", res);
      return;
    }
    this.upsert(res.body, index);
    this.refreshEmpty();
    this.cells.get(res.body.id)?.editor.focus();
  }

  async move(entry, delta) {
    const order = this.order();
    const to = order.indexOf(entry.id) + delta;
    if (to < 0 || to >= order.length) return;
    const res = await call(this.url(`/cells/${entry.id}`), "PATCH", { index: to });
    if (!res.ok) {
      failure("The cell was not moved", res);
      return;
    }
    const focused = document.activeElement;
    this.upsert(res.body, to);
    this.refreshEmpty();
    // The button pressed keeps the focus, or the other one when it no longer applies.
    const { up, down } = entry.controls;
    if (focused === up || focused === down) (focused.disabled ? (focused === up ? down : up) : focused).focus();
    announce(`Cell moved to place ${to + 1}`);
  }

  async delete(entry) {
    const place = this.order().indexOf(entry.id) + 1;
    const ok = await confirmDialog({
      title: `Delete cell ${place}?`,
      message: "Its code and outputs go, for the assistant too. This cannot be undone.",
      confirm: "Delete",
    });
    if (!ok) return;
    const res = await call(this.url(`/cells/${entry.id}`), "DELETE");
    if (!res.ok && res.status !== 404) {
      failure("The cell was not deleted", res);
      return;
    }
    const next = this.cells.get(this.order()[place]) ?? this.cells.get(this.order()[place - 2]);
    this.remove(entry.id);
    this.refreshEmpty();
    (next ? next.node : this.addButton).focus();
    announce(`Cell ${place} deleted`);
  }
}
