// The session's WebSocket: notebook changes, the session's new title, and the events of turns
// started elsewhere (another tab, the terminal chat), as they happen. It reconnects on its own.

import { api } from "./api.js";
import { $ } from "./dom.js";

export class Live {
  constructor({ onNotebook, onTitle, onBranch, onTurnEvent }) {
    this.handlers = { onNotebook, onTitle, onBranch, onTurnEvent };
    this.ws = null;
    this.sessionId = null;
    this.retry = 0;
    this.greeted = Promise.resolve();
    this.greet = () => {};
  }

  // Resolves once the open session's socket said hello (its notebook is shown), or after `ms`.
  ready(ms = 3000) {
    return Promise.race([this.greeted, new Promise((resolve) => setTimeout(resolve, ms))]);
  }

  connect(sessionId) {
    this.close();
    this.sessionId = sessionId;
    this.greeted = new Promise((resolve) => (this.greet = resolve));
    this.open();
  }

  open() {
    const sid = this.sessionId;
    if (!sid) return;
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    // Browsers cannot set headers on a WebSocket: the key travels as a subprotocol
    // ("turnstream.key.<key>"), never in the URL, which ends up in logs. Keys the server makes
    // are URL-safe base64, which a subprotocol token can carry.
    const url = `${proto}//${location.host}/ws/sessions/${encodeURIComponent(sid)}`;
    const ws = new WebSocket(url, ["turnstream", `turnstream.key.${api.key || ""}`]);
    this.ws = ws;
    setLiveState("connecting");
    ws.addEventListener("open", () => {
      this.retry = 0;
      setLiveState("live");
    });
    ws.addEventListener("message", (e) => {
      let msg;
      try {
        msg = JSON.parse(e.data);
      } catch {
        return;
      }
      this.onMessage(msg);
    });
    ws.addEventListener("close", () => {
      if (this.ws !== ws) return;
      setLiveState("offline");
      this.retry += 1;
      this.timer = setTimeout(() => this.ws === ws && this.open(), Math.min(500 * 2 ** this.retry, 8000));
    });
  }

  // Messages: {"type": "hello", "notebook": <notebook_state>} on connect, the notebook's own
  // messages (its cells, and {"type": "notebook_files", "files"}), {"type": "session", "title"},
  // {"type": "session", "current_leaf"} (another tab switched the branch shown) and
  // {"type": "event", "turn_id", "id", "n", "event", "data"} for every turn event of the session.
  onMessage(msg) {
    if (msg.session_id && msg.session_id !== this.sessionId) return;
    const { onNotebook, onTitle, onBranch, onTurnEvent } = this.handlers;
    if (msg.type === "hello") {
      if (msg.notebook) onNotebook({ type: "notebook_state", ...msg.notebook });
      this.greet();
    } else if (msg.type === "notebook" || msg.type === "notebook_state" || msg.type === "notebook_files") {
      onNotebook(msg);
    } else if (msg.type === "session" && msg.title) {
      onTitle(this.sessionId, msg.title);
    } else if (msg.type === "session" && msg.current_leaf) {
      onBranch(this.sessionId, msg.current_leaf);
    } else if (msg.type === "event" && msg.event) {
      onTurnEvent(msg.event, msg.data ?? {}, msg.id ?? null, msg.turn_id ?? msg.data?.turn_id);
    }
  }

  close() {
    clearTimeout(this.timer);
    const ws = this.ws;
    this.ws = null;
    if (ws) ws.close();
    setLiveState("none"); // no chat, nothing to be offline from: no badge
  }
}

function setLiveState(state) {
  const el = $("#live-state");
  el.hidden = state === "none";
  el.dataset.state = state;
  el.textContent = { live: "live", connecting: "connecting…", offline: "reconnecting…" }[state] || state;
}
