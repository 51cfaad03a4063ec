// Versions of a message (docs/branches.md): the session's turns form a tree, each naming the turn
// it follows. The page shows one path of it, from the first turn to the session's current leaf
// (the server's `current_leaf`, so a reload or a second tab shows the same). On that path:
//
//   ✎ on a user message     edits it in place; Enter sends it as a new turn after the turn before
//                           it (a sibling: a new version), Escape cancels
//   Regenerate on an answer the same message again, as a new sibling turn
//   ‹ 2/3 › on a turn with  switches to another version (PUT …/current); the page then shows that
//   siblings                version's newest branch: the path down to the most recently made turn
//                           under it (where that version was last written to)
//
// The notebook is not part of a version: it is the session's one live document, whichever branch
// the chat shows (said on the switcher).

import { api, errorText } from "./api.js";
import { announce, h, toast } from "./dom.js";

export const NOTEBOOK_NOTE = "The notebook is the chat's one live document, not one per version: "
  + "switching version changes the messages shown, not the cells.";

export class Branches {
  constructor(chat) {
    this.chat = chat;
    this.tree = new Map(); // turn id -> {id, parent, input}, in creation order
    this.starting = false; // a new version's POST is in flight (its turn_start is not another tab's)
    this.editor = null; // the open edit box, if any
    this.syncing = false;
    this.switching = false; // this page's own switch is in flight (the live echo of it is not news)
    this.changes = 0; // counts what this page learnt or did, so a late answer to sync() is dropped
  }

  clear() {
    this.tree.clear();
    this.editor = null;
  }

  setTurns(turns) {
    this.changes += 1;
    this.tree.clear();
    for (const t of turns || []) this.tree.set(t.id, { id: t.id, parent: t.parent_turn_id ?? null, input: t.input });
  }

  // A turn this page has seen start (its id is known now).
  register(view) {
    if (!view.turnId || this.tree.has(view.turnId)) return;
    this.tree.set(view.turnId, { id: view.turnId, parent: view.parentId ?? null, input: view.input });
    this.update();
  }

  siblings(id) {
    const me = this.tree.get(id);
    if (!me) return [id];
    return [...this.tree.values()].filter((t) => t.parent === me.parent).map((t) => t.id);
  }

  // The turns from the first down to `leaf`, by parent links.
  path(leaf) {
    const out = [];
    let at = this.tree.get(leaf);
    while (at && out.length <= this.tree.size) {
      out.push(at);
      at = at.parent ? this.tree.get(at.parent) : null;
    }
    return out.reverse();
  }

  // The most recently made turn at or under `id`: the leaf shown when switching to it.
  newestUnder(id) {
    for (const t of [...this.tree.values()].reverse()) {
      if (this.path(t.id).some((p) => p.id === id)) return t.id;
    }
    return id;
  }

  // Enables, counts and labels every turn's controls (called whenever the chat's state changes).
  update() {
    const busy = this.chat.busy || this.starting;
    for (const view of this.chat.turns) {
      const ids = view.turnId ? this.siblings(view.turnId) : [];
      view.showVersions(ids.length > 1 ? { index: ids.indexOf(view.turnId) + 1, count: ids.length } : null, busy);
      view.enableBranching(!busy && Boolean(view.turnId), busy);
    }
  }

  // --- the edit box ----------------------------------------------------------------------
  startEdit(view) {
    if (this.editor) this.editor.cancel({ focus: false });
    const hint = h("span", { class: "visually-hidden", id: `edit-hint-${view.turnId}`,
      text: "Enter sends it as a new version of this message, Shift+Enter adds a line, Escape cancels." });
    const box = h("textarea", { class: "edit-input", rows: "2", "aria-label": "Edit your message",
      "aria-describedby": hint.id });
    box.value = view.input;
    const cancelBtn = h("button", { type: "button", class: "btn btn-small", text: "Cancel",
      "aria-label": "Cancel the edit" });
    const sendBtn = h("button", { type: "submit", class: "btn btn-small btn-primary", text: "Send",
      "aria-label": "Send the edited message as a new version" });
    const note = view.inputAttachments
      ? h("div", { class: "edit-note", text: "The attachments of this message are not sent again." }) : null;
    const form = h("form", { class: "edit-form", "aria-label": "Edit message" }, hint, box, note,
      h("div", { class: "edit-actions" }, cancelBtn, sendBtn));
    const editor = {
      view,
      cancel: ({ focus = true } = {}) => {
        form.remove();
        view.userBody.hidden = false;
        view.node.classList.remove("editing");
        if (this.editor === editor) this.editor = null;
        if (focus) view.editBtn.focus();
      },
    };
    const submit = async () => {
      const text = box.value.trim();
      if (!text || box.disabled) return;
      box.disabled = sendBtn.disabled = cancelBtn.disabled = true;
      const ok = await this.edit(view, text);
      if (ok) {
        if (this.editor === editor) this.editor = null;
        return;
      }
      box.disabled = sendBtn.disabled = cancelBtn.disabled = false;
      box.focus();
    };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      submit();
    });
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        submit();
      } else if (e.key === "Escape") {
        e.preventDefault();
        e.stopPropagation();
        editor.cancel();
      }
    });
    cancelBtn.addEventListener("click", () => editor.cancel());
    this.editor = editor;
    view.node.classList.add("editing");
    view.userBody.hidden = true;
    view.userBody.after(form);
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  }

  // --- new versions ----------------------------------------------------------------------
  // `text` edited: a new turn after `view`'s parent. Without `text`: `view`'s message again.
  edit(view, text) {
    return this.start(view, text);
  }

  regenerate(view) {
    return this.start(view, null);
  }

  async start(view, text) {
    const chat = this.chat;
    if (chat.busy || this.starting || !view.turnId) return false;
    const again = text === null;
    const url = again ? `/api/sessions/${chat.sessionId}/turns/${view.turnId}/regenerate`
      : `/api/sessions/${chat.sessionId}/turns`;
    const body = again ? undefined : { message: text, parent_turn_id: view.parentId ?? null,
      client_tools: chat.clientToolSpecs() };
    this.starting = true;
    this.changes += 1;
    this.update();
    let resp;
    try {
      resp = await api.raw(url, { method: "POST", body, headers: { Accept: "text/event-stream" } });
      if (!resp.ok) {
        toast(`${again ? "Could not regenerate the answer" : "Could not send the edited message"}: ${await errorText(resp)}`);
        return false;
      }
    } catch (err) {
      toast(`Could not reach the server: ${err.message}`);
      return false;
    } finally {
      this.starting = false;
    }
    // The new version is the branch shown now: the turns after its parent leave the page.
    const at = chat.turns.indexOf(view);
    for (const gone of chat.turns.splice(at)) gone.node.remove();
    const fresh = chat.newTurn({ input: again ? view.input : text, parentId: view.parentId ?? null });
    announce(again ? "Regenerating the answer." : "Sent as a new version. The assistant is responding.");
    chat.follow(fresh, resp);
    return true;
  }

  // ‹ › : shows the sibling `step` places away from `view`'s turn.
  async switchBy(view, step) {
    const chat = this.chat;
    const ids = this.siblings(view.turnId);
    const target = ids[ids.indexOf(view.turnId) + step];
    if (!target || chat.busy || this.starting || this.switching) return;
    const depth = chat.turns.indexOf(view);
    const leaf = this.newestUnder(target);
    this.changes += 1;
    let session;
    // Until this page shows the version it asked for, the live channel's word that the session
    // switched (the echo of this very switch) must not redraw it first: that redraw would drop
    // the keyboard focus the switch keeps on the version buttons.
    this.switching = true;
    try {
      await api.json(`/api/sessions/${chat.sessionId}/current`, { method: "PUT", body: { turn_id: leaf } });
      session = await api.json(`/api/sessions/${chat.sessionId}`);
      await chat.load(session, { keep: depth, focus: step < 0 ? "prev" : "next" });
    } catch (err) {
      toast(`Could not switch version: ${err.message}`);
      return;
    } finally {
      this.switching = false;
    }
    const shown = chat.turns[depth];
    const n = shown ? this.siblings(shown.turnId) : ids;
    toast(`Showing version ${n.indexOf(shown?.turnId) + 1} of ${n.length}. ${NOTEBOOK_NOTE}`, "info", { ms: 5000 });
  }

  // Another tab (or client) may have switched the branch or added versions: the page asks the
  // server again when it is shown or focused (no event says so), unless a turn runs or an edit
  // is open here.
  async sync() {
    const chat = this.chat;
    const sid = chat.sessionId;
    if (!sid || chat.busy || this.starting || this.switching || this.editor || this.syncing) return;
    this.syncing = true;
    const seen = this.changes;
    try {
      const s = await api.json(`/api/sessions/${sid}`);
      if (sid !== chat.sessionId || seen !== this.changes || chat.busy || this.starting || this.switching ||
          this.editor) return;
      const known = (s.turns || []).length === this.tree.size;
      if (s.current_leaf && s.current_leaf !== chat.leafId()) await chat.load(s);
      else if (!known) {
        this.setTurns(s.turns);
        this.update();
      }
    } catch {
      /* the next focus asks again */
    } finally {
      this.syncing = false;
    }
  }
}
