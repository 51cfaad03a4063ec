// turnstream web chat: sessions, a chat that renders a turn's blocks inline in stream order,
// and the session's live notebook. Plain ES modules, no build step.
//
// The chat follows the SPEC §8 event stream. Every block is keyed by its index (its seq in
// the turn), so any event can arrive first, twice, or only in its stored form (a replay
// sends block_stop without block_start/block_delta) and the page still shows each block
// once, in place. Events carry `id: <turn_id>:<n>`; n is remembered per turn and events at
// or below it are dropped, which makes a resume with Last-Event-ID exact.

import { renderMarkdown } from "./markdown.js";
import { NotebookView } from "./notebook.js";
import { parseEventId, readEvents } from "./sse.js";

const KEY_STORAGE = "turnstream.key";
const ENDED = new Set(["complete", "failed", "cancelled", "interrupted"]);
const SESSION_STORAGE = "turnstream.session";
const $ = (sel, root = document) => root.querySelector(sel);

// --- the login key ----------------------------------------------------------------------
// The fragment may carry `key=` (printed by `turnstream serve`) and `session=` (the open
// chat, so a reload or a copied address shows the same one). The key is moved to
// localStorage and taken out of the address bar at once.
function fragment() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

function setFragment(params) {
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
}

function takeKeyFromFragment() {
  const frag = fragment();
  const key = frag.get("key");
  if (key) {
    localStorage.setItem(KEY_STORAGE, key);
    frag.delete("key");
    setFragment(frag);
  }
  return localStorage.getItem(KEY_STORAGE);
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const api = {
  key: null,
  headers(extra = {}) {
    const h = { ...extra };
    if (this.key) h.Authorization = `Bearer ${this.key}`;
    return h;
  },
  async raw(path, { method = "GET", body, headers = {}, signal } = {}) {
    const init = { method, headers: this.headers(headers), signal };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    const resp = await fetch(path, init);
    if (resp.status === 401) {
      showLogin("The key was not accepted. Paste a valid API key.");
      throw new ApiError(401, "unauthorised");
    }
    return resp;
  },
  async json(path, opts) {
    const resp = await this.raw(path, opts);
    if (!resp.ok) throw new ApiError(resp.status, await errorText(resp));
    if (resp.status === 204) return null;
    const text = await resp.text();
    return text ? JSON.parse(text) : null;
  },
};

async function errorText(resp) {
  try {
    const body = await resp.json();
    const detail = body.detail ?? body.message ?? body.error ?? body;
    return typeof detail === "string" ? detail : JSON.stringify(detail);
  } catch {
    return `${resp.status} ${resp.statusText}`;
  }
}

// --- small DOM helpers -------------------------------------------------------------------
function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) node.append(c);
  return node;
}

function announce(text) {
  const live = $("#announcer");
  live.textContent = "";
  requestAnimationFrame(() => (live.textContent = text));
}

function toast(text, kind = "error") {
  const t = h("div", { class: `toast toast-${kind}`, role: "alert", text });
  $("#toasts").append(t);
  setTimeout(() => t.remove(), 6000);
}

function prettyJson(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

// A JSON object as a readable list of keys and values: multi-line strings (code,
// tracebacks) as blocks, short values on one line, long ones pretty-printed.
function renderObject(target, obj, emptyText = "{}") {
  const keys = Object.keys(obj);
  if (!keys.length) {
    target.replaceChildren(h("pre", { class: "json muted", text: emptyText }));
    return;
  }
  const dl = h("dl", { class: "kv" });
  for (const k of keys) {
    const v = obj[k];
    let pre;
    if (typeof v === "string" && v.includes("\n")) pre = h("pre", { class: "code", text: v });
    else {
      const flat = JSON.stringify(v) ?? String(v);
      pre = h("pre", { class: "json", text: flat.length <= 100 ? flat : prettyJson(v) });
    }
    dl.append(h("dt", { text: k }), h("dd", {}, pre));
  }
  target.replaceChildren(dl);
}

function isPlainObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function renderToolInput(target, input) {
  if (isPlainObject(input)) renderObject(target, input);
  else target.replaceChildren(h("pre", { class: "json", text: prettyJson(input) }));
}

// A tool result is text; one that is a JSON object is shown like the input.
function parseResult(content) {
  const t = String(content ?? "").trim();
  if (t.startsWith("{") && t.endsWith("}")) {
    try {
      const v = JSON.parse(t);
      if (isPlainObject(v)) return v;
    } catch {
      /* not JSON after all */
    }
  }
  return null;
}

function resultText(content) {
  const obj = parseResult(content);
  return obj ? prettyJson(obj) : String(content ?? "");
}

// --- client-side tools: run in this browser, answered through tool-results --------------
const CLIENT_TOOLS = {
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

// --- blocks and turns -------------------------------------------------------------------
const TOOL_STATES = {
  streaming: "writing input…",
  ready: "queued",
  running: "running…",
  approval: "needs approval",
  client: "running in your browser…",
  done: "done",
  error: "error",
  denied: "denied",
};

class BlockView {
  constructor(turn, index, type, info = {}) {
    this.turn = turn;
    this.index = index;
    this.type = type;
    this.step = info.step ?? turn.step;
    this.stopped = false;
    this.text = "";
    this.raw = "";
    this.input = undefined;
    this.toolUseId = info.tool_use_id ?? null;
    this.name = info.name ?? null;
    this.node = this.build();
    this.node.dataset.index = String(index);
    this.dirty = false;
  }

  build() {
    switch (this.type) {
      case "thinking":
      case "redacted_thinking": {
        const label = this.type === "thinking" ? "Thinking" : "Thinking (redacted)";
        const node = h("details", { class: "block block-thinking" }, h("summary", { text: label }));
        this.body = h("div", { class: "thinking-text" });
        node.append(this.body);
        return node;
      }
      case "tool_use":
        return this.buildTool();
      case "tool_result":
        // Shown inside its call's card; this node is only a placeholder for ordering when
        // the call is unknown (it then shows the result on its own).
        this.body = h("pre", { class: "tool-output" });
        return h("div", { class: "block block-orphan-result", hidden: true },
          h("div", { class: "tool-result-label", text: "Tool result" }), this.body);
      case "provider":
        return h("div", { class: "block block-provider muted", text: "(provider block)" });
      default:
        this.body = h("div", { class: "md" });
        return h("div", { class: "block block-text" }, this.body);
    }
  }

  buildTool() {
    const name = this.name || "tool";
    this.state = h("span", { class: "tool-state", text: TOOL_STATES.streaming });
    this.title = h("span", { class: "tool-name", text: name });
    this.inputBox = h("div", { class: "tool-input", "aria-label": `Input of ${name}` });
    this.actions = h("div", { class: "tool-actions", hidden: true });
    this.resultBox = h("div", { class: "tool-result", hidden: true });
    const node = h("section", { class: "block block-tool", "data-state": "streaming", "aria-label": `Tool call ${name}` },
      h("header", { class: "tool-head" }, h("span", { class: "tool-icon", "aria-hidden": "true", text: "⚙" }),
        this.title, this.state),
      this.inputBox, this.actions, this.resultBox);
    if (this.toolUseId) node.dataset.toolUseId = this.toolUseId;
    return node;
  }

  setToolState(state) {
    if (this.type !== "tool_use") return;
    this.node.dataset.state = state;
    this.state.textContent = TOOL_STATES[state] || state;
  }

  // After a gap (a reconnect, or a reload that joined the block midway) the pieces missed
  // are gone for good: text stops growing until block_stop brings the whole block, while a
  // tool's `input` (always the parse of everything so far) stays usable.
  appendDelta(d) {
    if (typeof d.text === "string" && !this.gap) this.text += d.text;
    if (typeof d.partial_json === "string" && !this.gap) this.raw += d.partial_json;
    if (d.input !== undefined && d.input !== null) this.input = d.input;
    this.schedule();
  }

  finish(block) {
    this.stopped = true;
    this.block = block;
    if (block) {
      this.step = block.step ?? this.step;
      if (block.type === "text") this.text = block.text ?? this.text;
      else if (block.type === "thinking") this.text = block.thinking ?? this.text;
      else if (block.type === "redacted_thinking") this.text = "(encrypted reasoning, not shown)";
      else if (block.type === "tool_use") {
        this.input = block.input ?? this.input;
        this.toolUseId = block.tool_use_id;
        this.name = block.name;
        this.node.dataset.toolUseId = block.tool_use_id;
        this.title.textContent = block.name;
        this.node.setAttribute("aria-label", `Tool call ${block.name}`);
        if (block.input_error) this.inputError = block.input_error;
        if (this.node.dataset.state === "streaming") this.setToolState("running");
      }
    }
    this.render();
  }

  schedule() {
    if (this.dirty) return;
    this.dirty = true;
    requestAnimationFrame(() => {
      this.dirty = false;
      this.render();
    });
  }

  render() {
    switch (this.type) {
      case "thinking":
      case "redacted_thinking":
        this.body.textContent = this.text;
        break;
      case "tool_use":
        if (this.input !== undefined) renderToolInput(this.inputBox, this.input);
        else if (this.raw && !this.gap) this.inputBox.replaceChildren(h("pre", { class: "json partial", text: this.raw }));
        if (this.inputError) this.inputBox.append(h("div", { class: "tool-input-error", text: this.inputError }));
        break;
      case "tool_result":
        break;
      case "provider":
        break;
      default:
        this.body.innerHTML = renderMarkdown(this.text);
        this.node.classList.toggle("streaming", !this.stopped);
    }
  }

  // A tool_result block for this call.
  showResult(block, { pending = false } = {}) {
    this.resultBox.hidden = false;
    if (pending) {
      this.resultBox.replaceChildren(h("div", { class: "tool-result-label muted", text: "Result pending…" }));
      return;
    }
    this.hasResult = true;
    this.clearActions();
    const content = String(block.content ?? "");
    const obj = block.is_error ? null : parseResult(content);
    let body;
    if (obj) {
      body = h("div", { class: "tool-output tool-output-kv" });
      renderObject(body, obj);
    } else body = h("pre", { class: "tool-output", text: content });
    const long = content.length > 1200 || content.split("\n").length > 24;
    const label = block.is_error ? "Error" : "Result";
    const details = h("details", { class: "tool-result-details", open: !long },
      h("summary", { class: "tool-result-label" }, label,
        long ? h("span", { class: "muted", text: ` · ${content.length} characters` }) : null),
      body);
    this.resultBox.replaceChildren(details);
    this.resultBox.classList.toggle("is-error", Boolean(block.is_error));
    const denied = block.is_error && /denied/i.test(String(block.content));
    this.setToolState(denied ? "denied" : block.is_error ? "error" : "done");
  }

  askApproval(onDecide) {
    if (this.hasResult) return;
    this.setToolState("approval");
    this.actions.hidden = false;
    const approve = h("button", { class: "btn btn-approve", type: "button", text: "Approve",
      "aria-label": `Approve ${this.name}` });
    const deny = h("button", { class: "btn btn-deny", type: "button", text: "Deny", "aria-label": `Deny ${this.name}` });
    const decide = async (ok) => {
      approve.disabled = deny.disabled = true;
      try {
        await onDecide(ok);
        // The result may already be here (the stream is faster than this reply).
        if (!this.hasResult) {
          this.actions.replaceChildren(h("span", { class: "muted", text: ok ? "Approved" : "Denied" }));
          this.setToolState(ok ? "running" : "denied");
        }
      } catch (err) {
        approve.disabled = deny.disabled = false;
        toast(`Could not send the decision: ${err.message}`);
      }
    };
    approve.addEventListener("click", () => decide(true));
    deny.addEventListener("click", () => decide(false));
    this.actions.replaceChildren(
      h("span", { class: "tool-question", text: `Allow ${this.name} to run?` }), approve, deny);
    return approve;
  }

  clearActions() {
    if (!this.actions) return;
    this.actions.hidden = true;
    this.actions.replaceChildren();
  }
}

class TurnView {
  constructor(chat, { turnId = null, input = "", status = "running" } = {}) {
    this.chat = chat;
    this.turnId = turnId;
    this.status = status;
    this.lastN = 0;
    this.step = 0;
    this.blocks = new Map(); // index -> BlockView
    this.tools = new Map(); // tool_use_id -> BlockView (tool_use)
    this.requests = new Map(); // tool_use_id -> tool_request data
    this.errorSeq = 0;
    this.node = h("article", { class: "turn", "aria-label": "Conversation turn" });
    this.node.append(
      h("div", { class: "msg msg-user" }, h("div", { class: "msg-who", text: "You" }), h("div", { class: "msg-body", text: input })),
    );
    this.blocksEl = h("div", { class: "msg msg-assistant", "aria-label": "Assistant" });
    this.blocksEl.append(h("div", { class: "msg-who", text: "Assistant" }));
    this.typing = h("div", { class: "typing", "aria-hidden": "true" }, h("span"), h("span"), h("span"));
    this.footer = h("div", { class: "turn-footer muted" });
    this.blocksEl.append(this.typing);
    this.node.append(this.blocksEl, this.footer);
    this.setStatus(status);
    if (turnId) this.node.dataset.turnId = turnId;
  }

  get live() {
    return this.status === "running";
  }

  setStatus(status) {
    this.status = status;
    this.node.dataset.status = status;
    this.typing.hidden = status !== "running";
  }

  // Places a node among the blocks by its index (errors use fractional indexes).
  place(node, index) {
    const kids = [...this.blocksEl.children].filter((c) => c.dataset.index !== undefined);
    const after = kids.find((c) => Number(c.dataset.index) > index);
    this.blocksEl.insertBefore(node, after || this.typing);
  }

  ensureBlock(index, type, info = {}) {
    let b = this.blocks.get(index);
    if (b && b.type !== type && type) {
      // A replay may reveal the real type of a block created from a delta.
      b.node.remove();
      this.blocks.delete(index);
      b = null;
    }
    if (!b) {
      b = new BlockView(this, index, type || "text", info);
      this.blocks.set(index, b);
      this.place(b.node, index);
      if (b.type === "tool_use" && b.toolUseId) this.tools.set(b.toolUseId, b);
    }
    return b;
  }

  // --- events ---------------------------------------------------------------------------
  apply(name, data, n) {
    if (n !== undefined && n !== null) {
      if (n <= this.lastN) return false; // seen already
      this.lastN = n;
      if (this.turnId) rememberN(this.turnId, n);
    }
    switch (name) {
      case "turn_start":
        if (data.turn_id && !this.turnId) {
          this.turnId = data.turn_id;
          this.node.dataset.turnId = data.turn_id;
        }
        this.setStatus("running");
        break;
      case "step_start":
        this.step = data.step;
        break;
      case "block_start": {
        const b = this.ensureBlock(data.index, data.type, { tool_use_id: data.tool_use_id, name: data.name });
        if (data.type === "tool_result" && data.tool_use_id) this.attachResult(b, data.tool_use_id, null);
        break;
      }
      case "block_delta": {
        const existing = this.blocks.get(data.index);
        const type = existing ? existing.type : typeof data.partial_json === "string" ? "tool_use" : "text";
        const b = this.ensureBlock(data.index, type);
        if (!existing) b.gap = true; // joined midway: its start is not ours to show
        b.appendDelta(data);
        break;
      }
      case "block_stop": {
        const block = data.block || {};
        const b = this.ensureBlock(data.index, block.type || this.blocks.get(data.index)?.type,
          { tool_use_id: block.tool_use_id, name: block.name, step: block.step });
        if (block.type === "tool_result") {
          b.stopped = true;
          b.step = block.step ?? b.step;
          this.attachResult(b, block.tool_use_id, block);
        } else {
          b.finish(block);
          if (b.type === "tool_use" && b.toolUseId) this.tools.set(b.toolUseId, b);
        }
        break;
      }
      case "tool_request":
        this.handleRequest(data);
        break;
      case "tool_approval": {
        const call = this.tools.get(data.tool_use_id);
        if (call && !call.hasResult) {
          call.clearActions();
          call.setToolState(data.approved ? "running" : "denied");
        }
        break;
      }
      case "step_restart":
        for (const [index, b] of [...this.blocks]) {
          if (b.step === data.step) {
            b.node.remove();
            this.blocks.delete(index);
            if (b.toolUseId && this.tools.get(b.toolUseId) === b) this.tools.delete(b.toolUseId);
          }
        }
        this.note(`Stream interrupted; retrying step ${data.step}${data.reason ? ` (${data.reason})` : ""}.`);
        break;
      case "turn_complete":
        this.complete(data);
        break;
      case "error":
        this.showError(data);
        break;
      default:
        break;
    }
    return true;
  }

  attachResult(placeholder, toolUseId, block) {
    const call = toolUseId ? this.tools.get(toolUseId) : null;
    if (call) {
      placeholder.node.hidden = true;
      if (block) call.showResult(block);
      else if (!call.hasResult) call.showResult(null, { pending: true });
      return;
    }
    if (block) {
      // A result whose call is not on the page: show it where it stands.
      placeholder.node.hidden = false;
      placeholder.body.textContent = resultText(block.content);
      placeholder.node.classList.toggle("is-error", Boolean(block.is_error));
    }
  }

  handleRequest(req) {
    this.requests.set(req.tool_use_id, req);
    let call = this.tools.get(req.tool_use_id);
    if (!call) {
      // The request names a call we have not seen (should not happen): show it anyway.
      const index = Math.max(-1, ...this.blocks.keys()) + 0.25;
      call = this.ensureBlock(index, "tool_use", { tool_use_id: req.tool_use_id, name: req.name });
      call.finish({ type: "tool_use", tool_use_id: req.tool_use_id, name: req.name, input: req.input });
    }
    if (call.hasResult) return;
    if (req.requires_approval) {
      const button = call.askApproval((approved) => this.chat.postToolResult(this, { tool_use_id: req.tool_use_id, approved }));
      announce(`${req.name} needs your approval.`);
      if (button && this.chat.isCurrent(this)) button.focus();
      return;
    }
    if (req.executor === "client") {
      call.setToolState("client");
      // Only the tab that follows the turn runs it, so two open tabs do not both answer.
      if (this.following) this.chat.runClientTool(this, req);
    }
  }

  showError(err) {
    this.errorSeq += 1;
    const index = Math.max(-1, ...this.blocks.keys()) + 0.5 + this.errorSeq / 1000;
    const node = h("div", { class: "block block-error", role: "alert" },
      h("strong", { text: err.code ? `${err.code}: ` : "Error: " }), err.message || "Something went wrong.",
      err.retryable ? h("span", { class: "muted", text: " (retryable)" }) : null);
    node.dataset.index = String(index);
    this.place(node, index);
  }

  note(text) {
    const index = Math.max(-1, ...this.blocks.keys()) + 0.5;
    const node = h("div", { class: "block block-note muted", text });
    node.dataset.index = String(index);
    this.place(node, index);
  }

  complete(data) {
    this.setStatus(data.status || "complete");
    for (const b of this.blocks.values()) if (!b.stopped && b.type === "text") b.finish(null);
    const parts = [];
    if (data.status === "awaiting_client") {
      this.footer.textContent = "";
      return;
    }
    if (data.status && data.status !== "complete") parts.push(data.status.replace(/_/g, " "));
    if (data.stop_reason && !["end_turn", data.status].includes(data.stop_reason)) {
      parts.push(`stop: ${data.stop_reason.replace(/_/g, " ")}`);
    }
    if (data.steps) parts.push(`${data.steps} step${data.steps === 1 ? "" : "s"}`);
    const u = data.usage;
    if (u && (u.input_tokens || u.output_tokens)) parts.push(`${u.input_tokens} in · ${u.output_tokens} out tokens`);
    this.footer.textContent = parts.join(" · ");
    this.node.dataset.stopReason = data.stop_reason || "";
  }

  // A stored turn from GET /api/sessions/{id}.
  static fromStored(chat, turn) {
    const view = new TurnView(chat, { turnId: turn.id, input: turn.input, status: turn.status });
    for (const block of turn.blocks || []) {
      view.apply("block_stop", { index: block.seq, block }, null);
    }
    if (turn.status !== "running" && turn.status !== "awaiting_client") {
      view.complete({ status: turn.status, stop_reason: turn.stop_reason, usage: turn.usage, steps: turn.steps });
    }
    if (turn.error) view.showError({ code: turn.status === "failed" ? "failed" : "error", message: turn.error });
    return view;
  }
}

// The last event number seen per turn survives a reload (sessionStorage), so a resumed
// stream asks only for what the page has not shown.
function rememberN(turnId, n) {
  try {
    sessionStorage.setItem(`turnstream.n.${turnId}`, String(n));
  } catch {
    /* storage full or disabled: a full replay is still correct */
  }
}
function recallN(turnId) {
  const v = Number(sessionStorage.getItem(`turnstream.n.${turnId}`));
  return Number.isFinite(v) ? v : 0;
}

// --- the chat ---------------------------------------------------------------------------
class Chat {
  constructor() {
    this.log = $("#chat-log");
    this.form = $("#composer");
    this.input = $("#message");
    this.sendBtn = $("#send");
    this.stopBtn = $("#stop");
    this.sessionId = null;
    this.turns = [];
    this.active = null; // the TurnView being streamed
    this.controllers = new Set();
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

  reset(sessionId) {
    for (const c of this.controllers) c.abort();
    this.controllers.clear();
    this.sessionId = sessionId;
    this.turns = [];
    this.active = null;
    this.log.replaceChildren();
    this.updateControls();
  }

  showIntro(demo) {
    const intro = h("div", { class: "intro" },
      h("h2", { text: "Ask for some data analysis" }),
      h("p", { text: "The assistant writes and runs notebook cells beside this chat. Each tool call shows up inline, as it streams." }));
    const ideas = ["Create an example notebook with some data analysis", "What time is it in my browser?"];
    const list = h("div", { class: "suggestions" });
    for (const idea of ideas) {
      list.append(h("button", { type: "button", class: "btn btn-suggestion", text: idea, onclick: () => {
        this.input.value = idea;
        this.autosize();
        this.input.focus();
      } }));
    }
    intro.append(list);
    intro.append(h("p", { class: "muted demo-note", hidden: !demo,
      text: "Offline demo: the answers are scripted; the tools, the kernel and the notebook are real." }));
    this.log.append(intro);
  }

  addTurn(view) {
    $(".intro", this.log)?.remove();
    this.turns.push(view);
    this.log.append(view.node);
    this.scrollSoon(true);
    return view;
  }

  // The log sticks to its bottom while new content streams in, unless the reader has
  // scrolled up to look at something (then it stays put until they scroll back down).
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
    const busy = Boolean(this.active && this.active.status === "running");
    const waiting = Boolean(this.active && this.active.status === "awaiting_client");
    this.sendBtn.disabled = busy || waiting || !this.sessionId && !app.ready;
    this.stopBtn.hidden = !(busy || waiting);
    $("#chat-status").textContent = busy ? "Assistant is working…" : waiting ? "Waiting for you" : "";
    document.body.classList.toggle("turn-running", busy);
  }

  async send() {
    const message = this.input.value.trim();
    if (!message) return;
    if (this.active && (this.active.status === "running" || this.active.status === "awaiting_client")) {
      toast("A turn is still running in this session. Stop it first.", "info");
      return;
    }
    if (!this.sessionId) {
      const s = await app.sessions.create(message.slice(0, 60));
      if (!s) return;
    }
    this.input.value = "";
    this.autosize();
    const view = this.addTurn(new TurnView(this, { input: message }));
    this.active = view;
    this.updateControls();
    announce("Sent. The assistant is responding.");
    const body = { message, client_tools: Object.values(CLIENT_TOOLS).map((t) => t.spec) };
    const ctl = new AbortController();
    this.controllers.add(ctl);
    let resp;
    try {
      resp = await api.raw(`/api/sessions/${this.sessionId}/turns`, {
        method: "POST", body, headers: { Accept: "text/event-stream" }, signal: ctl.signal,
      });
    } catch (err) {
      this.controllers.delete(ctl);
      if (ctl.signal.aborted) return;
      view.showError({ code: "network", message: `Could not reach the server: ${err.message}` });
      view.complete({ status: "failed" });
      this.active = null;
      this.updateControls();
      return;
    }
    if (!resp.ok) {
      this.controllers.delete(ctl);
      const text = await errorText(resp);
      view.showError({ code: String(resp.status), message: resp.status === 409 ? `Another turn is running in this session (${text}).` : text });
      view.complete({ status: "failed" });
      this.active = null;
      this.updateControls();
      this.input.value = message;
      return;
    }
    this.controllers.delete(ctl);
    await this.follow(view, resp);
  }

  // Reads a turn's events until the turn ends. The server closes a stream after each
  // turn_complete, also one that only pauses for this client (awaiting_client); the page
  // then asks again from the last event it has, and that stream waits for the
  // continuation. A dropped connection is resumed the same way, with a growing delay.
  async follow(view, firstResponse = null) {
    if (view.following) return;
    view.following = true;
    this.active = view;
    this.updateControls();
    const ctl = new AbortController();
    this.controllers.add(ctl);
    view.abort = ctl;
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

  async load(session) {
    this.reset(session.id);
    const turns = session.turns || [];
    if (!turns.length) this.showIntro(app.config?.demo);
    for (const t of turns) {
      const view = this.addTurn(TurnView.fromStored(this, t));
      if (t.status === "running" || t.status === "awaiting_client") {
        // Resume: the page already shows the stored blocks; ask for what follows.
        // A turn that waits for this client is replayed from its start, to find its
        // tool requests again; a running one continues after the last event shown.
        view.lastN = t.status === "running" ? recallN(t.id) : 0;
        this.active = view;
        this.follow(view);
      }
    }
    this.updateControls();
    this.scrollSoon(true);
  }
}

// --- sessions ---------------------------------------------------------------------------
class Sessions {
  constructor() {
    this.list = $("#session-list");
    this.items = [];
    $("#new-session").addEventListener("click", () => this.create());
    this.list.addEventListener("keydown", (e) => this.onKey(e));
  }

  async refresh() {
    const data = await api.json("/api/sessions");
    this.items = Array.isArray(data) ? data : data?.sessions ?? data?.items ?? [];
    this.items.sort((a, b) => (b.created_at ?? 0) - (a.created_at ?? 0));
    this.render();
    return this.items;
  }

  render() {
    this.list.replaceChildren();
    if (!this.items.length) {
      this.list.append(h("li", { class: "muted empty", text: "No chats yet." }));
    }
    for (const s of this.items) {
      const current = s.id === app.chat.sessionId;
      const title = s.title || "Untitled chat";
      const when = s.created_at ? new Date(s.created_at * 1000).toLocaleString([], { dateStyle: "short", timeStyle: "short" }) : "";
      const open = h("button", { type: "button", class: "session-open", "aria-current": current ? "true" : null,
        "data-session-id": s.id, onclick: () => app.openSession(s.id) },
        h("span", { class: "session-title", text: title }), h("span", { class: "session-when", text: when }));
      const del = h("button", { type: "button", class: "session-delete", "aria-label": `Delete chat “${title}”`,
        title: "Delete chat", text: "×", onclick: () => this.remove(s) });
      this.list.append(h("li", { class: current ? "current" : "" }, open, del));
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

  async create(title = "New chat") {
    try {
      const s = await api.json("/api/sessions", { method: "POST", body: { title, toolset: "notebook" } });
      await app.openSession(s.id, s);
      app.chat.input.focus();
      await this.refresh();
      return s;
    } catch (err) {
      toast(`Could not create a chat: ${err.message}`);
      return null;
    }
  }

  async remove(s) {
    if (!confirm(`Delete the chat “${s.title || "Untitled chat"}”? This cannot be undone.`)) return;
    try {
      await api.json(`/api/sessions/${s.id}`, { method: "DELETE" });
    } catch (err) {
      if (err.status !== 404) {
        toast(`Could not delete: ${err.message}`);
        return;
      }
    }
    if (app.chat.sessionId === s.id) app.closeSession();
    await this.refresh();
    $("#new-session").focus();
  }
}

// --- the session's WebSocket: notebook changes (and turn events, when the server sends them)
class Live {
  constructor(notebook) {
    this.notebook = notebook;
    this.ws = null;
    this.sessionId = null;
    this.retry = 0;
  }

  connect(sessionId) {
    this.close();
    this.sessionId = sessionId;
    this.open();
  }

  open() {
    const sid = this.sessionId;
    if (!sid) return;
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    // Browsers cannot set headers on a WebSocket: the key travels as a subprotocol
    // ("turnstream.key.<key>"), never in the URL, which ends up in logs. Keys the server
    // makes are URL-safe base64, which a subprotocol token can carry.
    const key = api.key || "";
    const url = `${proto}//${location.host}/ws/sessions/${encodeURIComponent(sid)}`;
    const ws = new WebSocket(url, ["turnstream", `turnstream.key.${key}`]);
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

  // Messages: {"type": "hello", "notebook": <notebook_state>} on connect, the notebook's
  // own messages, and {"type": "event", "turn_id", "id", "n", "event", "data"} for every
  // turn event of the session.
  onMessage(msg) {
    if (msg.session_id && msg.session_id !== this.sessionId) return;
    if (msg.type === "hello") {
      if (msg.notebook) this.notebook.apply({ type: "notebook_state", ...msg.notebook });
      return;
    }
    if (msg.type === "notebook" || msg.type === "notebook_state") {
      this.notebook.apply(msg);
      return;
    }
    if (msg.type === "event" && msg.event) {
      app.onTurnEvent(msg.event, msg.data ?? {}, msg.id ?? null, msg.turn_id ?? msg.data?.turn_id);
    }
  }

  close() {
    clearTimeout(this.timer);
    const ws = this.ws;
    this.ws = null;
    if (ws) ws.close();
  }
}

function setLiveState(state) {
  const el = $("#live-state");
  el.dataset.state = state;
  el.textContent = { live: "live", connecting: "connecting…", offline: "reconnecting…" }[state] || state;
}

// --- the app ----------------------------------------------------------------------------
const app = {
  ready: false,
  config: null,
  chat: null,
  sessions: null,
  notebook: null,
  live: null,

  async start() {
    api.key = takeKeyFromFragment();
    this.chat = new Chat();
    this.sessions = new Sessions();
    this.notebook = new NotebookView($("#notebook"));
    this.live = new Live(this.notebook);
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
    for (const path of ["/api/config", "/healthz"]) {
      try {
        const resp = await api.raw(path);
        if (resp.ok) {
          cfg = await resp.json();
          break;
        }
      } catch {
        /* try the next */
      }
    }
    this.config = normaliseConfig(cfg);
    const banner = $("#demo-banner");
    banner.hidden = !this.config.demo;
    if (this.config.demo) {
      $("#demo-model").textContent = this.config.model || "scripted:notebook-demo";
    }
    $("#model-name").textContent = this.config.model || "";
    for (const note of document.querySelectorAll(".demo-note")) note.hidden = !this.config.demo;
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
      return;
    }
    localStorage.setItem(SESSION_STORAGE, session.id);
    const frag = fragment();
    frag.set("session", session.id);
    setFragment(frag);
    document.body.dataset.sessionId = session.id;
    $("#chat-title").textContent = session.title || "Untitled chat";
    this.notebook.clear();
    this.live.connect(session.id); // its hello message carries the notebook
    await this.chat.load(session);
    this.sessions.render();
    if (session.model) $("#model-name").textContent = session.model;
  },

  closeSession() {
    localStorage.removeItem(SESSION_STORAGE);
    const frag = fragment();
    frag.delete("session");
    setFragment(frag);
    delete document.body.dataset.sessionId;
    this.live.close();
    this.notebook.clear();
    this.chat.reset(null);
    this.chat.showIntro(this.config?.demo);
    $("#chat-title").textContent = "New chat";
    this.sessions.render();
  },

  // Turn events that reach this tab over the WebSocket: a turn another tab (or client)
  // started shows here live too. Turns this tab streams itself are left to that stream.
  onTurnEvent(name, data, id, turnId) {
    const parsed = parseEventId(id);
    const tid = parsed?.turnId ?? turnId;
    const chat = this.chat;
    if (!tid) return;
    let view = chat.turns.find((t) => t.turnId === tid);
    if (!view) {
      // A turn this tab is starting has no id until its own stream says; wait for that.
      if (name !== "turn_start" || chat.turns.some((t) => !t.turnId)) return;
      view = chat.addTurn(new TurnView(chat, { turnId: tid, input: "…" }));
      view.remote = true;
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
      if (t) view.node.querySelector(".msg-user .msg-body").textContent = t.input;
    } catch {
      /* the message stays elided */
    }
  },
};

function normaliseConfig(cfg) {
  const c = cfg || {};
  const model = c.model ?? c.default_model ?? "";
  const demo = Boolean(c.demo ?? c.demo_mode ?? c.offline_demo ?? String(model).startsWith("scripted:"));
  return { ...c, model, demo };
}

function showLogin(message) {
  const dlg = $("#login-dialog");
  $("#login-message").textContent = message;
  if (!dlg.open) dlg.showModal();
  $("#login-key").focus();
}

app.start();
window.turnstream = app; // for debugging in the console
