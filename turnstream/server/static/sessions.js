// The chat list in the sidebar: every chat of this key's user, newest first, and "New chat" on
// top while one is being started (it reaches the server with its first message). Arrow keys move
// between chats; deleting asks first, in the page's own dialog.

import { api } from "./api.js";
import { $, h, toast } from "./dom.js";
import { confirmDialog } from "./dialog.js";

export class Sessions {
  constructor(app) {
    this.app = app;
    this.list = $("#session-list");
    this.items = [];
    $("#new-session").addEventListener("click", () => app.newChat());
    this.list.addEventListener("keydown", (e) => this.onKey(e));
  }

  async refresh() {
    const data = await api.json("/api/sessions");
    this.items = Array.isArray(data) ? data : data?.sessions ?? [];
    this.items.sort((a, b) => (b.created_at ?? 0) - (a.created_at ?? 0));
    const current = this.items.find((s) => s.id === this.app.chat.sessionId);
    if (current?.title) $("#chat-title").textContent = current.title;
    this.render();
    return this.items;
  }

  title(s) {
    return s.title || "Untitled chat";
  }

  setTitle(id, title) {
    const s = this.items.find((x) => x.id === id);
    if (s) s.title = title;
    if (this.app.chat.sessionId === id) $("#chat-title").textContent = title;
    this.render();
  }

  render() {
    const current = this.app.chat.sessionId;
    this.list.replaceChildren();
    if (!current && this.app.ready) {
      const draft = h("button", { type: "button", class: "session-open", "aria-current": "true",
        onclick: () => this.app.newChat() }, h("span", { class: "session-title", text: "New chat" }),
        h("span", { class: "session-when", text: "not sent yet" }));
      this.list.append(h("li", { class: "current draft" }, draft));
    }
    for (const s of this.items) {
      const here = s.id === current;
      const title = this.title(s);
      const when = s.created_at ? new Date(s.created_at * 1000).toLocaleString([], { dateStyle: "short", timeStyle: "short" }) : "";
      const open = h("button", { type: "button", class: "session-open", "aria-current": here ? "true" : null,
        "data-session-id": s.id, onclick: () => this.app.openSession(s.id) },
        h("span", { class: "session-title", text: title }), h("span", { class: "session-when", text: when }));
      const del = h("button", { type: "button", class: "session-delete", "aria-label": `Delete chat “${title}”`,
        title: "Delete chat", text: "×", onclick: () => this.remove(s) });
      this.list.append(h("li", { class: here ? "current" : "" }, open, del));
    }
  }

  onKey(e) {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    const buttons = [...this.list.querySelectorAll(".session-open")];
    const i = buttons.indexOf(document.activeElement);
    if (i < 0) return;
    e.preventDefault();
    buttons[Math.max(0, Math.min(buttons.length - 1, i + (e.key === "ArrowDown" ? 1 : -1)))].focus();
  }

  // A chat just created here: on top of the list now, before any reload or refresh.
  add(s) {
    this.items = [s, ...this.items.filter((x) => x.id !== s.id)];
    this.render();
  }

  // A new chat on the server, for whatever starts it (see app.startSession).
  async create() {
    try {
      return await api.json("/api/sessions", { method: "POST", body: { toolset: "notebook" } });
    } catch (err) {
      toast(`Could not create a chat: ${err.message}`);
      return null;
    }
  }

  async remove(s) {
    const ok = await confirmDialog({ title: "Delete this chat?",
      message: `“${this.title(s)}”, its messages and its notebook will be deleted. This cannot be undone.`,
      confirm: "Delete" });
    if (!ok) return;
    try {
      await api.json(`/api/sessions/${s.id}`, { method: "DELETE" });
    } catch (err) {
      if (err.status !== 404) {
        toast(`Could not delete: ${err.message}`);
        return;
      }
    }
    toast(`Deleted “${this.title(s)}”.`, "info", { ms: 3000 });
    if (this.app.chat.sessionId === s.id) this.app.newChat();
    await this.refresh();
    $("#new-session").focus();
  }
}
