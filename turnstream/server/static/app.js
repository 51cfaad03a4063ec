// turnstream web chat: the chats of a user, a chat that renders each turn's blocks inline in
// stream order, and the session's live notebook. Plain ES modules, no build step:
//
//   app.js       this file: sign-in, start-up, opening chats, wiring the parts together
//   api.js       the key and the HTTP API          dom.js       small DOM helpers
//   chat.js      the chat pane, sending, following a turn's event stream
//   turn.js      one turn's blocks, errors in words, Retry
//   branches.js  versions of a message: edit, Regenerate, ‹ 2/3 ›
//   toolview.js  a tool call as one line that opens to its formatted input and result
//   sessions.js  the chat list                      dialog.js    the page's confirmation dialog
//   live.js      the session's WebSocket            layout.js    drawer and tabs on small screens
//   markdown.js  the model's text                   highlight.js code colours (highlight.js)
//   notebook.js  the notebook pane, its cells        theme.js     charts in the page's theme
//   editor.js    a cell's code editor               outputs.js   a cell's outputs
//   datafiles.js data files: list, upload, chat      ipynb.js     .ipynb download and import
//   sse.js       reading an event stream

import { KEY_STORAGE, api, fragment, setFragment, takeKeyFromFragment } from "./api.js";
import { Chat } from "./chat.js";
import { DataFiles } from "./datafiles.js";
import { $, toast } from "./dom.js";
import { loadEditor } from "./editor.js";
import { Ipynb } from "./ipynb.js";
import { Layout } from "./layout.js";
import { Live } from "./live.js";
import { NotebookView } from "./notebook.js";
import { Sessions } from "./sessions.js";
import { parseEventId } from "./sse.js";
import { relabelCells, setCellLabeler } from "./toolview.js";
import { ENDED, TurnView } from "./turn.js";

const SESSION_STORAGE = "turnstream.session";

// "cell 2": a cell's place in the notebook pane, for tool call summaries.
function cellLabel(id) {
  const cells = [...document.querySelectorAll(".cells .cell")];
  const i = cells.findIndex((c) => c.dataset.cellId === id);
  return i >= 0 ? `cell ${i + 1}` : `cell ${id}`;
}

function normaliseConfig(cfg) {
  const c = cfg || {};
  const model = c.model ?? c.default_model ?? "";
  const demo = Boolean(c.demo ?? String(model).startsWith("scripted:"));
  return { ...c, model, demo };
}

function showLogin(message) {
  const dlg = $("#login-dialog");
  $("#login-message").textContent = message;
  if (!dlg.open) dlg.showModal();
  $("#login-key").focus();
}

const app = {
  ready: false,
  config: null,
  chat: null,
  sessions: null,
  notebook: null,
  live: null,
  layout: null,

  async start() {
    api.key = takeKeyFromFragment();
    api.onUnauthorised = () => showLogin("The key was not accepted. Paste a valid API key.");
    setCellLabeler(cellLabel);
    this.layout = new Layout();
    this.chat = new Chat(this);
    this.sessions = new Sessions(this);
    this.notebook = new NotebookView($("#notebook"), { onPlaces: relabelCells, ensureSession: () => this.ensureSession() });
    this.files = new DataFiles(this);
    this.ipynb = new Ipynb(this);
    this.live = new Live({
      onNotebook: (msg) => {
        if (msg.type === "notebook_files") {
          this.files.show(msg.files);
          return;
        }
        this.notebook.apply(msg);
        if (msg.type === "notebook_state") this.files.show(msg.files);
        this.layout.notebookChanged(this.notebook.cells.size);
      },
      onTitle: (id, title) => this.sessions.setTitle(id, title),
      // Another tab switched the branch shown: show it here too (unless this one is mid-edit or busy).
      onBranch: (id, leaf) => {
        if (id === this.chat.sessionId && leaf !== this.chat.leafId()) this.chat.branches.sync();
      },
      onTurnEvent: (name, data, id, turnId) => this.onTurnEvent(name, data, id, turnId),
    });
    $("#login").addEventListener("submit", (e) => {
      e.preventDefault();
      const key = $("#login-key").value.trim();
      if (!key) return;
      localStorage.setItem(KEY_STORAGE, key);
      api.key = key;
      $("#login-dialog").close();
      this.boot();
    });
    $("#logout").addEventListener("click", () => {
      localStorage.removeItem(KEY_STORAGE);
      api.key = null;
      location.reload();
    });
    if (!api.key) {
      showLogin("Open the address that `turnstream serve` printed, or paste your API key.");
      return;
    }
    await this.boot();
  },

  async boot() {
    this.loadConfig();
    await loadEditor(); // CodeMirror, or plain text boxes when its bundle is absent
    let items;
    try {
      items = await this.sessions.refresh();
    } catch (err) {
      if (err.status !== 401) toast(`Could not load chats: ${err.message}`);
      return;
    }
    this.ready = true;
    const wanted = fragment().get("session");
    const saved = localStorage.getItem(SESSION_STORAGE);
    const pick = items.find((s) => s.id === wanted) ?? items.find((s) => s.id === saved) ?? items[0];
    if (pick) await this.openSession(pick.id);
    else this.closeSession();
    this.chat.input.focus();
    document.body.dataset.ready = "true";
  },

  async loadConfig() {
    let cfg = null;
    try {
      const resp = await api.raw("/api/config");
      if (resp.ok) cfg = await resp.json();
    } catch {
      /* shown as not a demo */
    }
    this.config = normaliseConfig(cfg);
    $("#demo-banner").hidden = !this.config.demo;
    if (this.config.demo) $("#demo-model").textContent = this.config.model || "scripted:notebook-demo";
    $("#model-name").textContent = this.config.model || "";
    for (const note of document.querySelectorAll(".demo-note")) note.hidden = !this.config.demo;
    // MCP servers that did not start (GET /api/config: mcp_servers), in the server's words.
    const down = (this.config.mcp_servers || []).filter((s) => s.state !== "up");
    $("#mcp-banner").hidden = down.length === 0;
    $("#mcp-banner").textContent = down.map((s) => `⚠ ${s.message}`).join(" · ");
  },

  async openSession(id, known = null) {
    let session;
    try {
      session = known?.turns ? known : await api.json(`/api/sessions/${id}`);
    } catch (err) {
      if (err.status === 404) {
        localStorage.removeItem(SESSION_STORAGE);
        toast("That chat no longer exists.", "info");
        await this.sessions.refresh();
      } else toast(`Could not open the chat: ${err.message}`);
      return false;
    }
    localStorage.setItem(SESSION_STORAGE, session.id);
    const frag = fragment();
    frag.set("session", session.id);
    setFragment(frag);
    document.body.dataset.sessionId = session.id;
    $("#chat-title").textContent = session.title || (session.turns?.length ? "Untitled chat" : "New chat");
    this.notebook.open(session.id);
    this.files.show([]);
    this.layout.notebookChanged(0);
    this.live.connect(session.id); // its hello message carries the notebook
    await this.chat.load(session);
    this.sessions.render();
    this.layout.closeDrawer({ focus: false });
    if (session.model) $("#model-name").textContent = session.model;
    return true;
  },

  // "+ New chat": nothing is created on the server until the first message is sent.
  newChat() {
    this.closeSession();
    this.layout.closeDrawer({ focus: false });
    this.layout.show("chat");
    this.chat.input.focus();
  },

  // The draft becomes a chat on the server: called by whatever starts it (the first message or
  // suggestion, Attach, + Cell, Upload data, Import .ipynb). It is on top of the sidebar at once.
  async startSession() {
    const s = await this.sessions.create();
    if (!s) return false;
    this.sessions.add(s);
    return this.openSession(s.id, { ...s, turns: [] });
  },

  // The open chat's id, creating the chat first when this is a draft (null when that failed).
  async ensureSession() {
    if (this.chat.sessionId) return this.chat.sessionId;
    if (!(await this.startSession())) return null;
    await this.live.ready(); // the new notebook's state first, then what the caller adds to it
    return this.chat.sessionId;
  },

  closeSession() {
    localStorage.removeItem(SESSION_STORAGE);
    const frag = fragment();
    frag.delete("session");
    setFragment(frag);
    delete document.body.dataset.sessionId;
    this.live.close();
    this.notebook.open(null);
    this.files.show([]);
    this.layout.notebookChanged(0);
    this.chat.reset(null);
    this.chat.showIntro(this.config?.demo);
    $("#chat-title").textContent = "New chat";
    this.sessions.render();
  },

  // Turn events that reach this tab over the WebSocket: a turn another tab (or client) started
  // shows here live too. Turns this tab streams itself are left to that stream.
  onTurnEvent(name, data, id, turnId) {
    const parsed = parseEventId(id);
    const tid = parsed?.turnId ?? turnId;
    const chat = this.chat;
    if (!tid) return;
    let view = chat.turns.find((t) => t.turnId === tid);
    if (!view) {
      // A turn this tab is starting has no id until its own stream says; wait for that.
      if (name !== "turn_start" || chat.turns.some((t) => !t.turnId) || chat.branches.starting) return;
      view = chat.addTurn(new TurnView(chat, { turnId: tid, input: "…" }));
      view.remote = true;
      chat.deliverQueued(view);
      chat.active = view;
      this.fillInput(view, chat.sessionId);
    }
    if (view.following) return;
    if (!view.apply(name, data, parsed?.n ?? null)) return;
    chat.scrollSoon();
    if (ENDED.has(view.status) && chat.active === view) chat.active = null;
    chat.updateControls();
  },

  async fillInput(view, sessionId) {
    try {
      const s = await api.json(`/api/sessions/${sessionId}`);
      const t = (s.turns || []).find((x) => x.id === view.turnId);
      if (!t || sessionId !== this.chat.sessionId) return;
      const chat = this.chat;
      const before = chat.turns[chat.turns.indexOf(view) - 1];
      if ((t.parent_turn_id ?? null) !== (before?.turnId ?? null) && chat.turns.includes(view)) {
        // A new version started elsewhere (an edit, a regenerated answer): show its branch.
        await chat.load(s);
        return;
      }
      view.setInput(t.input);
      view.parentId = t.parent_turn_id ?? null;
      chat.branches.setTurns(s.turns);
      chat.branches.update();
    } catch {
      /* the message stays elided */
    }
  },
};

app.start();
window.turnstream = app; // for debugging in the console
