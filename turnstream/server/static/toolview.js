// A tool call in the chat: one line (name, what it was asked, status, duration) that opens to the
// call's input and result, each formatted for reading rather than shown as JSON: code as
// highlighted code, tables as tables, errors as text, long output folded.

import { h, seconds } from "./dom.js";
import { elicitationForm } from "./elicitation.js";
import { highlight } from "./highlight.js";

const STATES = {
  streaming: "writing…",
  ready: "queued",
  running: "running…",
  approval: "needs approval",
  input: "asks you",
  client: "in your browser…",
  done: "done",
  error: "error",
  denied: "denied",
};
const FOLD_LINES = 14;
const FOLD_CHARS = 1500;

// How a cell id reads in a summary ("cell 2"); the app sets it from the notebook pane.
let cellLabel = (id) => `cell ${id}`;
export function setCellLabeler(fn) {
  cellLabel = fn;
}

// The calls whose summary names a cell by its place. A call can reach the chat before its cell
// reaches the notebook pane (the two come over different connections), and cells move: the
// notebook pane calls relabelCells() whenever its cells' places may have changed.
const CELL_TOOLS = new Set(["update_cell", "run_cell", "delete_cell"]);
const labelled = new Set();
export function relabelCells() {
  for (const view of labelled) {
    if (view.node.isConnected) view.showSummary();
    else labelled.delete(view);
  }
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const firstLine = (text) => String(text ?? "").split("\n").map((l) => l.trim()).find((l) => l && !l.startsWith("-- name:")) ?? "";

function short(value) {
  if (typeof value === "string") return firstLine(value);
  return JSON.stringify(value) ?? String(value);
}

// What a call was asked, in a few words.
export function summarize(name, input) {
  if (!isObject(input)) return input === undefined ? "" : short(input);
  const lang = input.language === "sql" ? "SQL" : "Python";
  switch (name) {
    case "create_cell":
      return `${lang} · ${firstLine(input.code)}`;
    case "update_cell":
      return `${cellLabel(input.cell_id)} · ${firstLine(input.code)}`;
    case "run_cell":
    case "delete_cell":
      return input.cell_id ? cellLabel(input.cell_id) : "";
    case "get_notebook_state":
      return input.include_outputs ? "with outputs" : "";
    default: {
      const parts = Object.entries(input).filter(([, v]) => v !== null && v !== undefined && v !== "");
      if (parts.length === 1) return short(parts[0][1]);
      return parts.map(([k, v]) => `${k}: ${short(v)}`).join(", ");
    }
  }
}

function codeBlock(text, language) {
  const code = h("code", { text });
  if (language) highlight(code, language);
  return h("pre", { class: "code" }, code);
}

// Text that may be long: the first lines, and a button that shows the rest.
export function folded(text, cls = "tool-text") {
  text = text.replace(/\n$/, "");
  const pre = h("pre", { class: cls, text });
  const lines = text.split("\n").length;
  if (lines <= FOLD_LINES && text.length <= FOLD_CHARS) return pre;
  const box = h("div", { class: "fold folded" }, pre);
  const button = h("button", { type: "button", class: "btn btn-small fold-toggle", "aria-expanded": "false",
    text: `Show all ${lines} lines` });
  button.addEventListener("click", () => {
    const open = box.classList.toggle("folded") === false;
    button.setAttribute("aria-expanded", String(open));
    button.textContent = open ? "Show less" : `Show all ${lines} lines`;
  });
  box.append(button);
  return box;
}

// An object as a list of names and values; strings that hold lines (code, tracebacks) as blocks.
function keyValues(obj, codeLanguage = null) {
  const dl = h("dl", { class: "kv" });
  for (const [k, v] of Object.entries(obj)) {
    let value;
    if (k === "code" && typeof v === "string") value = codeBlock(v, codeLanguage);
    else if (typeof v === "string") value = v.includes("\n") ? folded(v) : h("span", { class: "kv-text", text: v });
    else if (isObject(v) || Array.isArray(v)) {
      const flat = JSON.stringify(v);
      value = flat.length <= 80 ? h("code", { text: flat }) : folded(JSON.stringify(v, null, 2), "tool-json");
    } else value = h("code", { text: String(v) });
    dl.append(h("dt", { text: k.replace(/_/g, " ") }), h("dd", {}, value));
  }
  return dl;
}

// The call's input, formatted (`raw` is the JSON text streamed so far, when nothing parses yet).
export function renderInput(name, input, raw = "") {
  if (input === undefined) return raw ? h("pre", { class: "tool-json partial", text: raw }) : null;
  if (!isObject(input)) return h("pre", { class: "tool-json", text: JSON.stringify(input, null, 2) });
  if (!Object.keys(input).length) return h("p", { class: "muted tool-none", text: "No input." });
  if (name === "create_cell" || name === "update_cell") {
    const rest = { ...input };
    delete rest.code;
    delete rest.language;
    if (rest.cell_id) rest.cell_id = `${cellLabel(rest.cell_id)} (#${rest.cell_id})`;
    if (rest.after_cell_id) rest.after_cell_id = cellLabel(rest.after_cell_id);
    const box = h("div", { class: "tool-code" },
      codeBlock(String(input.code ?? ""), input.language === "sql" ? "sql" : "python"));
    if (Object.keys(rest).length) box.append(keyValues(rest));
    return box;
  }
  return keyValues(input);
}

// pandas' text preview of a DataFrame as an HTML table, when every row splits into the header's
// columns (plus the index); null when it does not (values with spaces, wide frames cut with …).
export function tableFromPreview(preview) {
  const lines = String(preview).split("\n").filter((l) => l.trim() && !/^\[\d+ rows x \d+ columns\]$/.test(l.trim()));
  if (lines.length < 2) return null;
  const head = lines[0].trim().split(/\s+/);
  const rows = lines.slice(1).map((l) => l.trim().split(/\s+/));
  const indexed = rows.every((r) => r.length === head.length + 1);
  if (!indexed && !rows.every((r) => r.length === head.length)) return null;
  const number = /^-?[\d.,]+(e[-+]?\d+)?%?$/i;
  const cell = (tag, text, extra = "") => h(tag, { class: number.test(text) ? `num${extra}` : extra || null, text });
  const thead = h("tr", {}, indexed ? h("th", { class: "index" }, h("span", { class: "visually-hidden", text: "row" })) : null,
    ...head.map((c) => h("th", { scope: "col", text: c })));
  const body = rows.map((r) => h("tr", {}, ...r.map((c, i) => (indexed && i === 0 ? cell("th", c, " index") : cell("td", c)))));
  return h("div", { class: "table-scroll" }, h("table", { class: "tool-table" }, h("thead", {}, thead), h("tbody", {}, ...body)));
}

function outputNode(out) {
  switch (out.type) {
    case "table": {
      const table = tableFromPreview(out.preview ?? "") ?? folded(String(out.preview ?? ""));
      return h("div", { class: "tool-out" }, table,
        h("div", { class: "muted tool-meta", text: `${out.rows} rows × ${out.columns} columns` }));
    }
    case "plotly":
      return h("p", { class: "tool-out muted", text: `${String(out.summary ?? "A chart").replace(/ \(shown to the user\)$/, "")}, shown in the notebook.` });
    case "error": {
      const box = h("div", { class: "tool-out tool-error" }, h("div", { class: "err-head", text: out.error }));
      if (out.traceback) box.append(h("details", { class: "traceback" }, h("summary", { text: "Traceback" }), folded(out.traceback)));
      return box;
    }
    default:
      return h("div", { class: `tool-out out-${out.type}` }, folded(String(out.text ?? "")));
  }
}

function notebookCells(cells) {
  if (!cells.length) return h("p", { class: "muted", text: "The notebook is empty." });
  const rows = cells.map((c, i) => h("tr", {}, h("td", { class: "num", text: String(i + 1) }),
    h("td", { text: c.language === "sql" ? "SQL" : "Python" }), h("td", { text: c.status ?? "" }),
    h("td", {}, h("code", { text: firstLine(c.code) }))));
  return h("div", { class: "table-scroll" }, h("table", { class: "tool-table" },
    h("thead", {}, h("tr", {}, ...["#", "language", "status", "code"].map((t) => h("th", { scope: "col", text: t })))),
    h("tbody", {}, ...rows)));
}

function parsed(content) {
  const t = String(content ?? "").trim();
  if (!t.startsWith("{") && !t.startsWith("[")) return undefined;
  try {
    return JSON.parse(t);
  } catch {
    return undefined;
  }
}

// What the notebook's editing tools answered, in a sentence.
const SAID = {
  create_cell: (v) => v.cell_id && `Added as cell ${Number(v.index) + 1} (${v.language === "sql" ? "SQL" : "Python"}, #${v.cell_id}); it has not run yet.`,
  update_cell: (v) => v.cell_id && `Changed ${cellLabel(v.cell_id)}.${v.stale_cells?.length
    ? ` Now out of date: ${v.stale_cells.map(cellLabel).join(", ")}.` : ""}`,
  delete_cell: (v) => v.deleted && `Deleted #${v.deleted}; ${v.remaining_cells} cell${v.remaining_cells === 1 ? "" : "s"} left.`,
};

// A tool_result block of tool `name`, formatted. Errors are text; JSON is read by its shape.
export function renderResult(block, name = "") {
  const content = String(block.content ?? "");
  if (block.is_error) return folded(content, "tool-text tool-error-text");
  const value = parsed(content);
  const sentence = isObject(value) && SAID[name]?.(value);
  if (sentence) return h("p", { class: "tool-said", text: sentence });
  if (isObject(value) && Array.isArray(value.outputs) && "status" in value) {
    const facts = [value.status, value.seconds !== undefined ? seconds(value.seconds) : null,
      value.ran_upstream?.length ? `ran ${value.ran_upstream.map(cellLabel).join(", ")} first` : null, value.note];
    const box = h("div", { class: "tool-run" }, h("p", { class: "tool-meta", text: facts.filter(Boolean).join(" · ") }));
    for (const out of value.outputs) box.append(outputNode(out));
    if (!value.outputs.length) box.append(h("p", { class: "muted", text: "No output." }));
    return box;
  }
  if (isObject(value) && Array.isArray(value.cells)) return notebookCells(value.cells);
  if (isObject(value)) return keyValues(value);
  if (value !== undefined) return folded(JSON.stringify(value, null, 2), "tool-json");
  return content ? folded(content) : h("p", { class: "muted", text: "(empty)" });
}

// The card of one tool call. `node` goes into the turn; the turn feeds it what the events say.
export class ToolCard {
  constructor(name, toolUseId) {
    this.name = name || "tool";
    this.input = undefined;
    this.hasResult = false;
    this.startedAt = null;
    this.untimed = false; // set for a call read from the store
    this.nameEl = h("span", { class: "tool-name", text: this.name });
    this.summaryEl = h("span", { class: "tool-summary" });
    this.stateEl = h("span", { class: "tool-state", text: STATES.streaming });
    this.timeEl = h("span", { class: "tool-time" });
    this.inputBox = h("div", { class: "tool-input", "aria-label": `Input of ${this.name}` });
    this.resultBox = h("div", { class: "tool-result", hidden: true });
    this.details = h("details", { class: "tool-details" },
      h("summary", { class: "tool-head" }, h("span", { class: "tool-icon", "aria-hidden": "true", text: "⚙" }),
        this.nameEl, this.summaryEl, this.stateEl, this.timeEl),
      h("div", { class: "tool-body" }, h("div", { class: "tool-label", text: "Input" }), this.inputBox, this.resultBox));
    this.actions = h("div", { class: "tool-actions", hidden: true });
    // Images the result returned: shown under the card, open or closed.
    this.media = h("div", { class: "tool-media", hidden: true, "aria-label": `Images from ${this.name}` });
    this.node = h("div", { class: "block block-tool", role: "group", "data-state": "streaming", "aria-label": `Tool call ${this.name}` },
      this.details, this.media, this.actions);
    if (toolUseId) this.node.dataset.toolUseId = toolUseId;
  }

  get state() {
    return this.node.dataset.state;
  }

  setCall(name, toolUseId) {
    this.name = name;
    this.nameEl.textContent = name;
    this.node.setAttribute("aria-label", `Tool call ${name}`);
    this.inputBox.setAttribute("aria-label", `Input of ${name}`);
    if (toolUseId) this.node.dataset.toolUseId = toolUseId;
  }

  setState(state) {
    this.node.dataset.state = state;
    this.stateEl.textContent = STATES[state] || state;
    // Timed from when the page saw it start; a call read from the store (a reload) is not: its
    // duration is the one its result gives (run_cell's `seconds`), or none.
    if ((state === "running" || state === "client") && !this.untimed) this.startedAt ??= performance.now();
  }

  // The input so far (`input`: the best parse; `raw`: the JSON text, while nothing parses).
  setInput(input, raw = "", error = null) {
    if (input !== undefined) this.input = input;
    const node = renderInput(this.name, this.input, raw);
    this.inputBox.replaceChildren(...(node ? [node] : []));
    if (error) this.inputBox.append(h("div", { class: "tool-input-error", text: error }));
    this.showSummary();
    if (CELL_TOOLS.has(this.name)) labelled.add(this);
  }

  showSummary() {
    this.summaryEl.textContent = summarize(this.name, this.input);
    this.summaryEl.title = this.summaryEl.textContent;
  }

  // How far a running call got (a tool_progress event): a bar under the card's head, seen with
  // the card closed, with "2/3 · what it does now"; the last report stays after the result.
  setProgress({ progress, total, message }) {
    if (!this.progressEl) {
      this.progressBar = h("progress", { class: "tool-progress-bar", "aria-label": `Progress of ${this.name}` });
      this.progressText = h("span", { class: "tool-progress-text" });
      this.progressEl = h("div", { class: "tool-progress" }, this.progressBar, this.progressText);
      this.details.after(this.progressEl);
    }
    if (total) {
      this.progressBar.max = total;
      this.progressBar.value = progress;
    } else {
      this.progressBar.removeAttribute("value"); // no total: an indeterminate bar
    }
    const done = total ? `${progress}/${total}` : `${progress}`;
    this.progressText.textContent = message ? `${done} · ${message}` : done;
  }

  // A model call this tool asked for while it ran (an MCP server's sampling request): a line
  // under the card with its tokens, one per call.
  addModelUse(usage) {
    const line = h("div", { class: "tool-model-use muted",
      text: `used the model: ${usage.input_tokens.toLocaleString()} tokens in, ${usage.output_tokens.toLocaleString()} out` });
    (this.modelUseEl ?? this.progressEl ?? this.details).after(line);
    this.modelUseEl = line;
  }

  showPending() {
    if (this.hasResult) return;
    this.resultBox.hidden = false;
    this.resultBox.replaceChildren(h("div", { class: "tool-label muted", text: "Result pending…" }));
  }

  // `media`: the result's attachments as nodes (attachments.js), or null.
  showResult(block, media = null) {
    this.hasResult = true;
    this.media.hidden = !media;
    this.media.replaceChildren(...(media ? [media] : []));
    this.clearActions();
    this.resultBox.hidden = false;
    const body = h("div", { class: "tool-output" }, renderResult(block, this.name));
    this.resultBox.replaceChildren(h("div", { class: "tool-label", text: block.is_error ? "Error" : "Result" }), body);
    this.resultBox.classList.toggle("is-error", Boolean(block.is_error));
    const denied = block.is_error && /denied/i.test(String(block.content));
    this.setState(denied ? "denied" : block.is_error ? "error" : "done");
    const took = this.startedAt !== null ? (performance.now() - this.startedAt) / 1000 : parsed(block.content)?.seconds;
    this.timeEl.textContent = Number.isFinite(took) ? seconds(took) : "";
  }

  // Approve / Always allow / Deny buttons and a box for the reason of a denial, beside the closed
  // card; returns the Approve button. `onDecide` gets the decision as the tool-results route takes
  // it ({approved, always?, reason?}). "Always allow" approves this call and every later call of
  // the tool in this session; a reason typed before Deny reaches the model with the denial.
  askApproval(onDecide, onError) {
    if (this.hasResult) return null;
    this.setState("approval");
    this.actions.hidden = false;
    const approve = h("button", { class: "btn btn-approve", type: "button", text: "Approve", "aria-label": `Approve ${this.name}` });
    const always = h("button", { class: "btn btn-always", type: "button", text: "Always allow",
      "aria-label": `Always allow ${this.name} in this session`,
      title: `Approve, and run ${this.name} without asking for the rest of this session` });
    const reason = h("input", { type: "text", class: "deny-reason", placeholder: "Reason, if you deny (optional)",
      "aria-label": `Why you deny ${this.name} (optional; the assistant reads it)`, maxlength: "2000" });
    const deny = h("button", { class: "btn btn-deny", type: "button", text: "Deny", "aria-label": `Deny ${this.name}` });
    const controls = [approve, always, reason, deny];
    const decide = async (decision) => {
      for (const c of controls) c.disabled = true;
      try {
        await onDecide(decision);
        // The result may be here already (the stream can be faster than this reply).
        if (!this.hasResult) {
          const said = decision.always ? "Always allowed in this session" : decision.approved ? "Approved"
            : decision.reason ? `Denied: ${decision.reason}` : "Denied";
          this.actions.replaceChildren(h("span", { class: "muted", text: said }));
          this.setState(decision.approved ? "running" : "denied");
        }
      } catch (err) {
        for (const c of controls) c.disabled = false;
        onError(err);
      }
    };
    approve.addEventListener("click", () => decide({ approved: true }));
    always.addEventListener("click", () => decide({ approved: true, always: true }));
    const denyWithReason = () => {
      const why = reason.value.trim();
      decide(why ? { approved: false, reason: why } : { approved: false });
    };
    deny.addEventListener("click", denyWithReason);
    reason.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") {
        ev.preventDefault();
        denyWithReason();
      }
    });
    this.actions.replaceChildren(h("span", { class: "tool-question", text: `Allow ${this.name} to run?` }), ...controls);
    return approve;
  }

  // The tool's server asks the user something mid-call (an MCP elicitation): its question and a
  // form from its schema. `onAnswer` gets {content} or {approved: false}. Returns a focus function.
  askElicitation(elicitation, onAnswer, onError) {
    if (this.hasResult) return null;
    this.setState("input");
    this.actions.hidden = false;
    const { form, focus } = elicitationForm(this.name, elicitation, async (body) => {
      try {
        await onAnswer(body);
      } catch (err) {
        onError(err);
        throw err;
      }
      if (!this.hasResult) {
        this.actions.replaceChildren(h("span", { class: "muted", text: "content" in body ? "Answered" : "Declined" }));
        this.setState("running");
      }
    });
    this.actions.replaceChildren(form);
    return focus;
  }

  clearActions() {
    this.actions.hidden = true;
    this.actions.replaceChildren();
  }
}
