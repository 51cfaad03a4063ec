// One turn in the chat: the user's message and the assistant's blocks, in stream order.
//
// The turn follows its event stream (docs/server.md). Every block is keyed by its index (its seq in the
// turn), so any event can arrive first, twice, or only in its stored form (a replay sends
// block_stop without block_start/block_delta) and the page still shows each block once, in
// place. Events carry `id: <turn_id>:<n>`; n is remembered per turn and events at or below it
// are dropped, which makes a resume with Last-Event-ID exact.

import { storedAttachments } from "./attachments.js";
import { announce, h, toast } from "./dom.js";
import { highlightAll } from "./highlight.js";
import { renderMarkdown } from "./markdown.js";
import { NOTEBOOK_NOTE } from "./branches.js";
import { ToolCard, folded } from "./toolview.js";

export const ENDED = new Set(["complete", "failed", "cancelled", "interrupted"]);

// What went wrong, in words: a heading, and the detail the server gave.
export function describeError({ code = "", message = "", retryable = false } = {}) {
  const said = message ? `It said: “${message}”.` : "";
  const again = retryable ? " This is usually temporary: try again in a moment." : "";
  if (/^provider_/.test(code) || code === "stream_protocol") {
    if (/overload/i.test(message)) return { title: "The model's provider is overloaded right now.", detail: `${said}${again}` };
    if (/rate.?limit|too many/i.test(message)) return { title: "The model's provider is limiting requests.", detail: `${said}${again}` };
    const what = code === "provider_status" ? "refused the request" : code === "stream_protocol"
      ? "sent an answer this server cannot read" : "reported an error while answering";
    return { title: `The model's provider ${what}.`, detail: `${said}${again}` };
  }
  if (code === "stream_broken") return { title: "The connection to the model broke off.", detail: `${said}${again}` };
  if (code === "network") return { title: "The server could not be reached.", detail: `${message}. Check that turnstream serve is still running.` };
  if (code === "store_error") return { title: "The server could not save this turn.", detail: `${said}${again}` };
  if (code === "409") return { title: "Another turn is still running in this chat.", detail: "Stop it, or wait for it to end." };
  if (code === "503") return { title: "The server is at capacity.", detail: "It could not start this turn in time; try again in a moment." };
  if (code === "404" || code === "410") return { title: "This turn is no longer on the server.", detail: message };
  if (code === "stored") return { title: "This turn failed.", detail: said };
  return { title: "Something went wrong on the server.", detail: said };
}

// --- blocks -------------------------------------------------------------------------------
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
        this.body = h("div", { class: "thinking-text" });
        return h("details", { class: "block block-thinking" }, h("summary", { text: label }), this.body);
      }
      case "tool_use":
        this.card = new ToolCard(this.name, this.toolUseId);
        return this.card.node;
      case "tool_result":
        // Shown inside its call's card; this node is only a placeholder for ordering when the
        // call is unknown (it then shows the result on its own).
        this.body = h("div", { class: "tool-output" });
        return h("div", { class: "block block-orphan-result", hidden: true },
          h("div", { class: "tool-label", text: "Tool result" }), this.body);
      case "provider":
        return h("div", { class: "block block-provider muted", text: "(provider block)" });
      case "compaction":
        // The first turns, summarised to fit the model's context: the turns stay on the page.
        this.body = h("div", { class: "msg-body" });
        return h("details", { class: "block block-compaction muted" },
          h("summary", { text: "Earlier turns summarised to fit the model's context" }), this.body);
      case "user":
        // A message sent while the turn ran, as the model received it (step 0: the input's
        // attachments, shown with the input instead).
        this.body = h("div", { class: "msg-body" });
        return h("div", { class: "block block-user msg-user", "data-state": "delivered" },
          h("div", { class: "msg-who", text: "You, while it worked" }), this.body);
      default:
        this.body = h("div", { class: "md" });
        return h("div", { class: "block block-text" }, this.body);
    }
  }

  // After a gap (a reconnect, or a reload that joined the block midway) the pieces missed are
  // gone for good: text stops growing until block_stop brings the whole block, while a tool's
  // `input` (always the parse of everything so far) stays usable.
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
        this.card.setCall(block.name, block.tool_use_id);
        if (block.input_error) this.inputError = block.input_error;
        this.card.untimed = this.turn.stored; // a stored call ran long ago: its time is its result's
        if (this.card.state === "streaming") this.card.setState("running");
      } else if (block.type === "user") this.showUser(block);
      else if (block.type === "compaction") {
        this.node.querySelector("summary").textContent =
          `The first ${block.covers} turns are sent to the model as this summary from here on (they stay here)`;
        this.body.textContent = block.summary;
      }
    }
    this.render();
  }

  showUser(block) {
    if (!block.step) {
      this.node.hidden = true;
      this.turn.showInputAttachments(block.attachments);
      return;
    }
    this.body.replaceChildren(block.text || "");
    if (block.attachments?.length) this.body.append(storedAttachments(this.turn.chat.sessionId, block.attachments));
    this.turn.delivered(block.text || "");
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
        this.card.setInput(this.input, this.gap ? "" : this.raw, this.inputError);
        break;
      case "tool_result":
      case "provider":
      case "user":
      case "compaction":
        break;
      default:
        this.body.innerHTML = renderMarkdown(this.text);
        this.node.classList.toggle("streaming", !this.stopped);
        if (this.stopped) highlightAll(this.body);
    }
  }
}

// --- turns --------------------------------------------------------------------------------
export class TurnView {
  constructor(chat, { turnId = null, input = "", status = "running", attachments = null, parentId = null } = {}) {
    this.chat = chat;
    this.turnId = turnId;
    this.parentId = parentId; // the turn this one follows (docs/branches.md), null for a first turn
    this.input = input;
    this.status = status;
    this.lastN = 0;
    this.step = 0;
    this.blocks = new Map(); // index -> BlockView
    this.tools = new Map(); // tool_use_id -> BlockView (tool_use)
    this.requests = new Map(); // tool_use_id -> tool_request data
    this.cost = 0; // the turn's cost so far in nano-dollars, from its `usage` events
    this.errorSeq = 0;
    this.node = h("article", { class: "turn", "aria-label": "Conversation turn" });
    this.userBody = h("div", { class: "msg-body", text: input });
    this.inputAttachments = attachments; // shown from the composer's files, or later from the store
    this.queued = []; // messages sent while this turn was open, not yet taken by it
    this.editBtn = h("button", { type: "button", class: "btn btn-small btn-ghost btn-edit", text: "✎",
      "aria-label": "Edit this message", title: "Edit this message (sends a new version)",
      onclick: () => chat.branches.startEdit(this) });
    this.userActions = h("div", { class: "msg-actions" }, this.editBtn);
    this.node.append(h("div", { class: "msg msg-user" }, h("div", { class: "msg-who", text: "You" }), this.userBody, attachments,
      this.userActions));
    this.blocksEl = h("div", { class: "msg msg-assistant", "aria-label": "Assistant" });
    this.who = h("div", { class: "msg-who", text: "Assistant" });
    this.blocksEl.append(this.who);
    this.agentAt = new Map(); // block index -> the agent that produced it (several agents)
    this.typing = h("div", { class: "typing", "aria-hidden": "true" }, h("span"), h("span"), h("span"));
    this.footer = h("div", { class: "turn-footer muted" });
    this.blocksEl.append(this.typing);
    this.regenBtn = h("button", { type: "button", class: "btn btn-small btn-ghost btn-regenerate", text: "↻ Regenerate",
      "aria-label": "Regenerate this answer", title: "Ask for another answer to this message (a new version)",
      hidden: true, onclick: () => chat.branches.regenerate(this) });
    this.answerActions = h("div", { class: "answer-actions" }, this.regenBtn);
    this.node.append(this.blocksEl, this.footer, this.answerActions);
    this.versions = null;
    this.setStatus(status);
    if (turnId) this.node.dataset.turnId = turnId;
  }

  // "‹ 2/3 ›" under the message when its turn has siblings (`info`: {index, count}), else nothing.
  showVersions(info, busy) {
    if (!info) {
      this.versions?.remove();
      this.versions = null;
      return;
    }
    if (!this.versions) {
      const prev = h("button", { type: "button", class: "btn btn-small btn-ghost version-prev", text: "‹",
        "aria-label": "Previous version", onclick: () => this.chat.branches.switchBy(this, -1) });
      const next = h("button", { type: "button", class: "btn btn-small btn-ghost version-next", text: "›",
        "aria-label": "Next version", onclick: () => this.chat.branches.switchBy(this, 1) });
      const label = h("span", { class: "version-label" });
      this.versions = h("div", { class: "versions", role: "group", title: NOTEBOOK_NOTE }, prev, label, next);
      this.versions.prev = prev;
      this.versions.next = next;
      this.versions.label = label;
      this.userActions.append(this.versions);
    }
    const { prev, next, label } = this.versions;
    label.textContent = `${info.index}/${info.count}`;
    this.versions.setAttribute("aria-label", `Version ${info.index} of ${info.count} of this message. ${NOTEBOOK_NOTE}`);
    this.versions.dataset.index = String(info.index);
    this.versions.dataset.count = String(info.count);
    prev.disabled = busy || info.index <= 1;
    next.disabled = busy || info.index >= info.count;
  }

  // Edit and Regenerate: offered on a stored turn while no turn runs (the server allows one open
  // turn per session); Regenerate once the answer has ended.
  enableBranching(can) {
    this.editBtn.disabled = !can;
    this.regenBtn.hidden = !this.turnId || !ENDED.has(this.status);
    this.regenBtn.disabled = !can;
  }

  setInput(text) {
    this.input = text;
    this.userBody.textContent = text;
  }

  showInputAttachments(attachments) {
    if (this.inputAttachments || !attachments?.length) return;
    this.inputAttachments = storedAttachments(this.chat.sessionId, attachments);
    this.userBody.after(this.inputAttachments);
  }

  // A message sent while this turn is open, shown at the end of what the turn has so far:
  // "queued" until the turn takes it (a `user` block replaces it), "denied" when it became the
  // reason for denying the calls that waited for approval, or refused with the server's words.
  addQueued(text, attachments) {
    const state = h("div", { class: "queued-state muted", text: "Queued: the assistant reads it at its next step" });
    const node = h("div", { class: "block block-user block-queued msg-user", "data-state": "queued" },
      h("div", { class: "msg-who", text: "You, while it worked" }), h("div", { class: "msg-body", text }), attachments, state);
    const index = Math.max(-1, ...this.blocks.keys()) + 0.9;
    node.dataset.index = String(index);
    this.place(node, index);
    const entry = {
      text,
      node,
      setState: (outcome) => {
        node.dataset.state = outcome;
        state.textContent = outcome === "denied" ? "Sent as the reason for denying the waiting tool calls"
          : outcome === "next_turn" ? "Delivered: it started the next turn"
          : "Queued: the assistant reads it at its next step";
        if (outcome !== "queued") this.queued = this.queued.filter((q) => q !== entry);
      },
      // The turn was stopped before a step read it: the server starts the next turn with it
      // (docs/steering.md), which marks it delivered; until then it says why it waits.
      stopped: () => {
        node.dataset.state = "stopped";
        state.textContent = "Not read by the stopped turn: it starts the next one";
      },
      refused: (why) => {
        node.dataset.state = "refused";
        state.textContent = `Not sent: ${why}`;
        this.queued = this.queued.filter((q) => q !== entry);
      },
    };
    this.queued.push(entry);
    return entry;
  }

  // The turn took a queued message (its `user` block is on the page now).
  delivered(text) {
    const entry = this.queued.find((q) => q.text === text);
    if (!entry) return;
    this.queued = this.queued.filter((q) => q !== entry);
    entry.node.remove();
  }

  queuedStartedNext() {
    for (const q of [...this.queued]) q.setState("next_turn");
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

  // --- events -----------------------------------------------------------------------------
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
        this.noteAgent(data.index, data.agent);
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
        this.noteAgent(data.index, block.agent);
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
        if (data.budget && data.note) this.note(data.note);
        this.handleRequest(data);
        break;
      case "usage":
        this.cost = data.turn_cost_nano_usd;
        if (data.tool_use_id) this.tools.get(data.tool_use_id)?.card.addModelUse(data.usage);
        break;
      case "budget_warning":
        this.note(budgetWarning(data));
        break;
      case "context_managed":
        this.note(contextNotice(data));
        break;
      case "tool_progress": {
        const call = this.tools.get(data.tool_use_id);
        if (call && !call.card.hasResult) call.card.setProgress(data);
        break;
      }
      case "tool_approval": {
        const call = this.tools.get(data.tool_use_id);
        if (call && !call.card.hasResult) {
          call.card.clearActions();
          call.card.setState(data.approved ? "running" : "denied");
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

  // Who speaks, in a session of several agents: the first agent names the message, and each
  // change of agent after that gets its own name label before the block where it begins.
  noteAgent(index, agent) {
    if (!agent || this.agentAt.has(index)) return;
    this.agentAt.set(index, agent);
    const known = [...this.agentAt.keys()].sort((a, b) => a - b);
    const at = known.indexOf(index);
    const before = at > 0 ? this.agentAt.get(known[at - 1]) : null;
    if (at === 0) {
      this.who.textContent = agent;
      this.blocksEl.dataset.agent = agent;
      this.blocksEl.setAttribute("aria-label", agent);
    }
    if (before === null || before === agent) return;
    const label = h("div", { class: "msg-who agent-switch", text: agent });
    label.dataset.agent = agent;
    label.dataset.index = String(index - 0.5);
    this.place(label, index - 0.5);
  }

  attachResult(placeholder, toolUseId, block) {
    const call = toolUseId ? this.tools.get(toolUseId) : null;
    const media = block?.attachments?.length ? storedAttachments(this.chat.sessionId, block.attachments) : null;
    if (call) {
      placeholder.node.hidden = true;
      if (block) call.card.showResult(block, media);
      else call.card.showPending();
      return;
    }
    if (block) {
      // A result whose call is not on the page: show it where it stands.
      placeholder.node.hidden = false;
      placeholder.body.replaceChildren(folded(String(block.content ?? "")), ...(media ? [media] : []));
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
      this.tools.set(req.tool_use_id, call);
    }
    if (call.card.hasResult) return;
    if (req.elicitation) {
      const focus = call.card.askElicitation(req.elicitation,
        (answer) => this.chat.postToolResult(this, { tool_use_id: req.tool_use_id, ...answer }),
        (err) => toast(`Could not send the answer: ${err.message}`));
      announce(`${req.name} asks: ${req.elicitation.message ?? ""}`);
      if (focus && this.chat.isCurrent(this)) focus();
      return;
    }
    if (req.requires_approval) {
      const button = call.card.askApproval(
        (decision) => this.chat.postToolResult(this, { tool_use_id: req.tool_use_id, ...decision }),
        (err) => toast(`Could not send the decision: ${err.message}`));
      announce(`${req.name} needs your approval.`);
      if (button && this.chat.isCurrent(this)) button.focus();
      return;
    }
    if (req.executor === "client") {
      call.card.setState("client");
      // Only the tab that follows the turn runs it, so two open tabs do not both answer.
      if (this.following) this.chat.runClientTool(this, req);
    }
  }

  // An error, in words, where it happened; a failed turn offers to send its message again.
  showError(err) {
    this.errorSeq += 1;
    const index = Math.max(-1, ...this.blocks.keys()) + 0.5 + this.errorSeq / 1000;
    const { title, detail } = describeError(err);
    const node = h("div", { class: "block block-error", role: "alert" },
      h("strong", { class: "error-title", text: title }), detail ? h("span", { class: "error-detail", text: ` ${detail}` }) : null);
    if (err.code) node.dataset.code = err.code;
    node.dataset.index = String(index);
    this.place(node, index);
    this.errorNode = node;
    this.offerRetry();
  }

  offerRetry() {
    const node = this.errorNode;
    if (!node || node.querySelector(".btn-retry") || !this.input) return;
    const retry = h("button", { type: "button", class: "btn btn-small btn-retry", text: "Retry",
      "aria-label": "Retry: send this message again" });
    retry.addEventListener("click", async () => {
      retry.disabled = true;
      if (!(await this.chat.retry(this))) retry.disabled = false;
    });
    node.append(h("div", { class: "error-actions" }, retry));
  }

  // "busy, retrying in N s" while the server is at capacity (chat.js retries); 0 removes it.
  busy(seconds) {
    this.busyNote?.remove();
    this.busyNote = null;
    if (!seconds) return;
    let left = seconds;
    const node = h("div", { class: "block block-note muted busy-note", role: "status" });
    const show = () => { node.textContent = `The server is busy; retrying in ${left} s.`; };
    show();
    const timer = setInterval(() => { left = Math.max(0, left - 1); show(); if (!node.isConnected) clearInterval(timer); }, 1000);
    node.dataset.index = String(Math.max(-1, ...this.blocks.keys()) + 0.5);
    this.place(node, Number(node.dataset.index));
    this.busyNote = node;
  }

  note(text) {
    const index = Math.max(-1, ...this.blocks.keys()) + 0.5;
    const node = h("div", { class: "block block-note muted", text });
    node.dataset.index = String(index);
    this.place(node, index);
  }

  complete(data) {
    this.setStatus(data.status || "complete");
    if (data.status === "cancelled") for (const q of this.queued) q.stopped();
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
    parts.push(...usageParts(data.usage, this.cost));
    this.footer.textContent = parts.join(" · ");
    this.node.dataset.stopReason = data.stop_reason || "";
  }

  // A stored turn from GET /api/sessions/{id}.
  static fromStored(chat, turn) {
    const view = new TurnView(chat, { turnId: turn.id, input: turn.input, status: turn.status,
      parentId: turn.parent_turn_id ?? null });
    view.stored = true;
    for (const block of turn.blocks || []) {
      view.apply("block_stop", { index: block.seq, block }, null);
    }
    view.stored = false;
    if (turn.status !== "running" && turn.status !== "awaiting_client") {
      view.complete({ status: turn.status, stop_reason: turn.stop_reason, usage: turn.usage, steps: turn.steps });
    }
    if (turn.error) view.showError({ code: "stored", message: turn.error });
    return view;
  }
}

// A turn's usage for its footer: tokens in and out, what the prompt cache read and wrote, and
// the cost when the model has a price (the `usage` events carry it; a stored turn has none).
// A server that sent no token counts (`unknown`) is said to have, not shown as 0 tokens.
export function usageParts(u, costNano) {
  const parts = [];
  const counted = u && (u.input_tokens || u.output_tokens);
  if (counted) parts.push(`${u.input_tokens} in · ${u.output_tokens} out tokens`);
  if (u && u.unknown) parts.push(counted ? "usage of some steps unknown" : "usage unknown");
  if (u && (u.cache_read_input_tokens || u.cache_creation_input_tokens)) {
    parts.push(`cache ${u.cache_read_input_tokens} read · ${u.cache_creation_input_tokens} written`);
  }
  if (costNano) parts.push(dollars(costNano));
  return parts;
}

function dollars(nano) {
  return `$${(nano / 1e9).toFixed(4)}`;
}

function budgetWarning(w) {
  const scope = { turn: "this turn", session: "this chat", user_day: "your day" }[w.scope] || w.scope;
  const used = w.limit_tokens != null ? `${w.spent_tokens} of ${w.limit_tokens} tokens`
    : `${dollars(w.spent_nano_usd)} of ${dollars(w.limit_nano_usd || 0)}`;
  return `Budget: ${scope} has used ${used}.`;
}

function contextNotice(c) {
  const n = c.cleared.length;
  const why = c.retry ? "The model refused the request as too long: " : "";
  const what = [];
  if (n) what.push(`${n} old tool result${n === 1 ? "" : "s"} left out of what the model reads`);
  if (c.summarised) what.push(`the first ${c.summarised} turns sent as a summary`);
  return `${why}${what.join(", and ")}, to fit its context `
    + `(~${c.tokens_before.toLocaleString()} → ~${c.tokens_after.toLocaleString()} of `
    + `${c.window.toLocaleString()} tokens). The chat keeps them.`;
}

// The last event number seen per turn survives a reload (sessionStorage), so a resumed stream
// asks only for what the page has not shown.
function rememberN(turnId, n) {
  try {
    sessionStorage.setItem(`turnstream.n.${turnId}`, String(n));
  } catch {
    /* storage full or disabled: a full replay is still correct */
  }
}

export function recallN(turnId) {
  const v = Number(sessionStorage.getItem(`turnstream.n.${turnId}`));
  return Number.isFinite(v) ? v : 0;
}
