// The chat pane: the composer, the welcome suggestions, sending a message and following its
// turn's event stream (resuming after a drop or a reload), the tools that run in this browser.

import { api, errorText } from "./api.js";
import { ComposerAttachments } from "./attachments.js";
import { Branches } from "./branches.js";
import { $, announce, h, toast } from "./dom.js";
import { parseEventId, readEvents } from "./sse.js";
import { ENDED, TurnView, recallN } from "./turn.js";

// Tools this browser runs itself: declared with every message, answered through tool-results.
export const CLIENT_TOOLS = {
  get_browser_time: {
    spec: {
      name: "get_browser_time",
      description:
        "The current date, time and time zone of the user's web browser. Use it for the user's local time.",
      input_schema: { type: "object", properties: {}, additionalProperties: false },
    },
    run() {
      const now = new Date();
      const tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
      return JSON.stringify({
        iso: now.toISOString(),
        local: now.toLocaleString(navigator.language, { timeZoneName: "short" }),
        time_zone: tz,
        utc_offset_minutes: -now.getTimezoneOffset(),
        locale: navigator.language,
      });
    },
  },
};

// What the welcome screen offers. The offline demo can do each of these (its scenario answers
// them; the browser tests click every one), and so can any real model.
export const SUGGESTIONS = ["Create an example notebook with some data analysis", "What time is it in my browser?"];

const BUSY_RETRIES = 5;

// Seconds a 503 asks the client to wait (Retry-After), between 1 and 30.
function retryAfter(resp) {
  const n = Number.parseInt(resp.headers.get("Retry-After") ?? "", 10);
  return Number.isFinite(n) ? Math.min(Math.max(n, 1), 30) : 2;
}

// Resolves after `ms`, or throws an AbortError as soon as `signal` aborts.
function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(new DOMException("stopped", "AbortError"));
    }, { once: true });
  });
}

export class Chat {
  constructor(app) {
    this.app = app;
    this.log = $("#chat-log");
    this.form = $("#composer");
    this.input = $("#message");
    this.sendBtn = $("#send");
    this.stopBtn = $("#stop");
    this.attachments = new ComposerAttachments(this.form, $("#attachment-chips"));
    this.sessionId = null;
    this.turns = [];
    this.active = null; // the TurnView being streamed
    this.controllers = new Set();
    this.branches = new Branches(this);
    // Another tab's switch arrives over the WebSocket ({"type": "session", "current_leaf"}, app.js);
    // a tab that was hidden or offline meanwhile asks again when it is shown.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.branches.sync();
    });
    window.addEventListener("focus", () => this.branches.sync());
    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.send();
    });
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.send();
      } else if (e.key === "Escape" && this.active) {
        e.preventDefault();
        this.stop();
      }
    });
    this.input.addEventListener("input", () => this.autosize());
    this.stick = true;
    this.autoTop = 0;
    this.log.addEventListener("scroll", () => {
      // Scroll events arrive late: content may have grown since the page scrolled itself.
      // Only a move upwards (the reader) unsticks; reaching the bottom sticks again.
      const el = this.log;
      if (el.scrollHeight - el.scrollTop - el.clientHeight < 48) this.stick = true;
      else if (el.scrollTop < this.autoTop - 8) this.stick = false;
      this.autoTop = Math.min(this.autoTop, el.scrollTop);
    }, { passive: true });
    // Whatever changes in the log (a delta, a result, a reflow) keeps the bottom in view.
    new MutationObserver(() => this.scrollSoon()).observe(this.log, { childList: true, subtree: true, characterData: true });
    this.stopBtn.addEventListener("click", () => this.stop());
  }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, 200)}px`;
  }

  isCurrent(turn) {
    return this.turns.includes(turn);
  }

  get busy() {
    return Boolean(this.active && (this.active.status === "running" || this.active.status === "awaiting_client"));
  }

  reset(sessionId) {
    for (const c of this.controllers) c.abort();
    this.controllers.clear();
    this.sessionId = sessionId;
    this.turns = [];
    this.active = null;
    this.branches.clear();
    this.log.replaceChildren();
    this.updateControls();
  }

  showIntro(demo) {
    const intro = h("div", { class: "intro" },
      h("h2", { text: "Ask for some data analysis" }),
      h("p", { text: "The assistant writes and runs notebook cells beside this chat. Each tool call shows up inline, as it streams." }));
    const list = h("div", { class: "suggestions" });
    for (const idea of SUGGESTIONS) {
      // The focus goes to the message box (the button goes with the intro), where Escape stops the turn.
      list.append(h("button", { type: "button", class: "btn btn-suggestion", text: idea, onclick: () => {
        this.input.focus();
        this.send(idea);
      } }));
    }
    intro.append(list);
    intro.append(h("p", { class: "muted demo-note", hidden: !demo,
      text: "Offline demo: the answers are scripted; the tools, the kernel and the notebook are real." }));
    this.log.append(intro);
  }

  addTurn(view) {
    $(".intro", this.log)?.remove();
    for (const t of this.turns) t.errorNode?.querySelector(".error-actions")?.remove(); // only the last can be retried
    const before = this.turns.at(-1);
    // A failed turn asked again (Retry) shows its question once: on the new turn, not on both.
    if (before && before.input === view.input && (before.status === "failed" || before.status === "cancelled")) {
      before.node.classList.add("turn-retried");
    }
    this.turns.push(view);
    this.log.append(view.node);
    this.scrollSoon(true);
    return view;
  }

  // The log sticks to its bottom while new content streams in, unless the reader has scrolled
  // up to look at something (then it stays put until they scroll back down).
  scrollSoon(force = false) {
    if (force) this.stick = true;
    if (!this.stick || this.scrollPending) return;
    this.scrollPending = true;
    requestAnimationFrame(() => requestAnimationFrame(() => {
      this.scrollPending = false;
      if (this.stick) {
        this.log.scrollTop = this.log.scrollHeight;
        this.autoTop = this.log.scrollTop;
      }
    }));
  }

  updateControls() {
    const running = Boolean(this.active && this.active.status === "running");
    const waiting = Boolean(this.active && this.active.status === "awaiting_client");
    this.sendBtn.disabled = !this.sessionId && !this.app.ready;
    this.stopBtn.hidden = !(running || waiting);
    $("#chat-status").textContent = running ? "Assistant is working… (a message sent now is queued for it)"
      : waiting ? "Waiting for you" : "";
    document.body.classList.toggle("turn-running", running);
    this.branches.update();
  }

  // The last turn shown that the server knows: what a new message follows.
  leafId() {
    return this.turns.findLast((t) => t.turnId)?.turnId ?? null;
  }

  clientToolSpecs() {
    return Object.values(CLIENT_TOOLS).map((t) => t.spec);
  }

  newTurn(opts) {
    return this.addTurn(new TurnView(this, opts));
  }

  // Sends `text` (the composer's text and attachments when none is given). A new chat is
  // created on the server only now, with its first message, so an empty chat is never left
  // behind. While a turn is open the message goes to it (docs/steering.md): queued for its
  // next step, or the reason for denying the calls that wait for approval.
  async send(text = null) {
    const message = (text ?? this.input.value).trim();
    if (!message) {
      if (text === null && this.attachments.count) toast("Add a few words about the attachments.", "info");
      return false;
    }
    const open = this.busy ? this.active : null;
    const fresh = !this.sessionId;
    if (fresh && !(await this.app.startSession())) return false;
    let taken = { parts: [], row: null, files: [] };
    if (text === null) {
      taken = await this.attachments.takeAll();
      this.input.value = "";
      this.autosize();
    }
    const giveBack = () => {
      if (text !== null) return;
      this.input.value = message;
      this.attachments.restore(taken.files);
    };
    const pending = open ? open.addQueued(message, taken.row) : null;
    // A new turn follows the last turn this page shows (another tab may have switched the
    // session's branch meanwhile: what the user sees is what they go on from).
    const leaf = open ? null : this.leafId();
    const view = open ? null : this.addTurn(new TurnView(this, { input: message, attachments: taken.row, parentId: leaf }));
    if (view) {
      this.active = view;
      this.updateControls();
      announce("Sent. The assistant is responding.");
    }
    const body = { message };
    if (taken.parts.length) body.parts = taken.parts;
    // Client tools are declared with a new turn only: a turn that is open keeps its own.
    if (!open) body.client_tools = this.clientToolSpecs();
    if (leaf) body.parent_turn_id = leaf;
    const ctl = new AbortController();
    this.controllers.add(ctl);
    let resp;
    try {
      // A server at capacity refuses a new turn at once (503 + Retry-After, nothing stored):
      // say so and send it again after the time it asks for, a few times (Stop ends the wait).
      for (let attempt = 1; ; attempt += 1) {
        resp = await api.raw(`/api/sessions/${this.sessionId}/turns`, {
          method: "POST", body, headers: { Accept: "text/event-stream" }, signal: ctl.signal,
        });
        if (resp.status !== 503 || pending || attempt > BUSY_RETRIES) break;
        const wait = retryAfter(resp);
        view.busy(wait);
        await pause(wait * 1000, ctl.signal);
      }
    } catch (err) {
      this.controllers.delete(ctl);
      if (ctl.signal.aborted) return true;
      if (pending) pending.refused(`Could not reach the server: ${err.message}`);
      else this.failed(view, { code: "network", message: `Could not reach the server: ${err.message}` });
      giveBack();
      return true;
    }
    this.controllers.delete(ctl);
    view?.busy(0);
    if (pending && resp.status === 202) {
      const out = await resp.json();
      pending.setState(out.outcome);
      announce(out.outcome === "denied" ? "Sent as the reason for denying the waiting tool calls." : "Queued for the assistant.");
      return true;
    }
    if (!resp.ok) {
      if (pending) pending.refused(await errorText(resp));
      else this.failed(view, { code: String(resp.status), message: await errorText(resp), retryable: resp.status === 503 });
      giveBack();
      return true;
    }
    let turnView = view;
    if (pending) {
      // The open turn ended meanwhile: the message started a turn of its own.
      pending.node.remove();
      turnView = this.addTurn(new TurnView(this, { input: message, attachments: taken.row }));
    }
    if (fresh) this.app.sessions.refresh(); // the server titled the chat after this message
    await this.follow(turnView, resp);
    return true;
  }

  // A turn started by messages queued while the previous one ran: they are delivered.
  deliverQueued(view) {
    for (const t of this.turns) if (t !== view) t.queuedStartedNext();
  }

  failed(view, err) {
    view.showError(err);
    view.complete({ status: "failed" });
    this.active = null;
    this.updateControls();
  }

  // Sends a failed turn's message again, as a new turn.
  retry(view) {
    if (this.turns.at(-1) !== view) return Promise.resolve(false);
    return this.send(view.input);
  }

  // Reads a turn's events until the turn ends. The server closes a stream after each
  // turn_complete, also one that only pauses for this client (awaiting_client); the page then
  // asks again from the last event it has, and that stream waits for the continuation. A
  // dropped connection is resumed the same way, with a growing delay.
  async follow(view, firstResponse = null) {
    if (view.following) return;
    view.following = true;
    this.active = view;
    this.updateControls();
    const ctl = new AbortController();
    this.controllers.add(ctl);
    let resp = firstResponse;
    let failures = 0;
    try {
      while (!ctl.signal.aborted) {
        let paused = false;
        if (!resp) {
          if (!view.turnId) break;
          for (const b of view.blocks.values()) if (!b.stopped) b.gap = true;
          const headers = { Accept: "text/event-stream" };
          if (view.lastN > 0) headers["Last-Event-ID"] = `${view.turnId}:${view.lastN}`;
          try {
            resp = await api.raw(`/api/sessions/${this.sessionId}/turns/${view.turnId}/events`, { headers, signal: ctl.signal });
          } catch (err) {
            if (ctl.signal.aborted || err.status === 401) break;
            resp = null;
          }
          if (resp && !resp.ok) {
            if (resp.status === 404 || resp.status === 410) {
              view.showError({ code: String(resp.status), message: await errorText(resp) });
              view.setStatus("failed");
              break;
            }
            resp = null;
          }
        }
        if (resp) {
          try {
            for await (const ev of readEvents(resp, ctl.signal)) {
              failures = 0;
              this.dispatch(view, ev);
              if (ev.event === "turn_complete") {
                paused = view.status === "awaiting_client";
                break;
              }
            }
          } catch {
            if (ctl.signal.aborted) break;
          }
          resp = null;
        }
        if (ENDED.has(view.status)) break;
        if (paused) continue; // follow the continuation at once
        failures += 1;
        $("#chat-status").textContent = "Connection lost — reconnecting…";
        await new Promise((r) => setTimeout(r, Math.min(250 * 2 ** failures, 4000)));
      }
    } finally {
      this.controllers.delete(ctl);
      view.following = false;
      if (ENDED.has(view.status)) {
        this.app.loadConfig(); // an MCP server that did not start during the turn: the banner says so
        announce(view.status === "complete" ? "The assistant has answered." : `Turn ${view.status}.`);
        if (this.active === view) this.active = null;
        if (!document.activeElement || document.activeElement === document.body) this.input.focus();
      }
      this.updateControls();
    }
  }

  dispatch(view, ev) {
    let data;
    try {
      data = JSON.parse(ev.data);
    } catch {
      return;
    }
    const id = parseEventId(ev.id);
    if (id && !view.turnId) {
      view.turnId = id.turnId;
      view.node.dataset.turnId = id.turnId;
      this.branches.register(view);
    }
    const fresh = view.apply(ev.event, data, id ? id.n : null);
    if (fresh) {
      this.scrollSoon();
      if (ev.event === "turn_complete" || ev.event === "tool_request" || ev.event === "turn_start") this.updateControls();
    }
  }

  async postToolResult(view, body) {
    await api.json(`/api/sessions/${this.sessionId}/tool-results`, {
      method: "POST", body: { turn_id: view.turnId ?? undefined, ...body },
    });
    // The turn goes on on the server; the open follow() stream shows what comes next.
    if (!view.following && this.isCurrent(view)) this.follow(view);
  }

  async runClientTool(view, req) {
    const tool = CLIENT_TOOLS[req.name];
    let body;
    try {
      if (!tool) throw new Error(`This browser has no tool named ${req.name}.`);
      body = { tool_use_id: req.tool_use_id, content: String(await tool.run(req.input || {})), is_error: false };
    } catch (err) {
      body = { tool_use_id: req.tool_use_id, content: `${err.name || "Error"}: ${err.message}`, is_error: true };
    }
    try {
      await this.postToolResult(view, body);
    } catch (err) {
      // 409/404: another tab (or an earlier load of this one) answered it already.
      if (err.status !== 409 && err.status !== 404) toast(`Could not send the result of ${req.name}: ${err.message}`);
    }
  }

  async stop() {
    const view = this.active;
    if (!view || !view.turnId) return;
    this.stopBtn.disabled = true;
    try {
      await api.json(`/api/sessions/${this.sessionId}/turns/${view.turnId}/cancel`, { method: "POST" });
      announce("Stopping.");
      if (!view.following) this.follow(view);
    } catch (err) {
      toast(`Could not stop the turn: ${err.message}`);
    } finally {
      this.stopBtn.disabled = false;
      this.input.focus();
    }
  }

  // Shows the session's current branch: its turns from the first to `current_leaf`. `keep`: the
  // place on that path of a turn to keep in view (a version switch), its `focus` button focused.
  async load(session, { keep = -1, focus = null } = {}) {
    this.reset(session.id);
    const all = session.turns || [];
    this.branches.setTurns(all);
    const leaf = session.current_leaf ?? all.at(-1)?.id;
    const onPath = new Set(this.branches.path(leaf).map((t) => t.id));
    const turns = all.filter((t) => onPath.has(t.id));
    if (!turns.length) this.showIntro(this.app.config?.demo);
    for (const t of turns) {
      const view = this.addTurn(TurnView.fromStored(this, t));
      if (t.status === "running" || t.status === "awaiting_client") {
        // Resume: the page already shows the stored blocks; ask for what follows. A turn that
        // waits for this client is replayed from its start, to find its tool requests again;
        // a running one continues after the last event shown.
        view.lastN = t.status === "running" ? recallN(t.id) : 0;
        this.active = view;
        this.follow(view);
      }
    }
    this.updateControls();
    const kept = this.turns[keep];
    if (!kept) {
      this.scrollSoon(true);
      return;
    }
    this.stick = false;
    kept.node.scrollIntoView({ block: "nearest" });
    const v = kept.versions;
    if (v) (v[focus]?.disabled ? (focus === "prev" ? v.next : v.prev) : v[focus])?.focus();
  }
}

