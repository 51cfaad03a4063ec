// The notebook pane: one card per cell (code, status badge, outputs), kept in step with
// the server's WebSocket messages:
//   {"type": "notebook_state", "version", "cells": [cell, ...], "sandbox"}   the whole notebook
//   {"type": "notebook", "version", "change", "cell", "index"?}                one change
// where change is cell_created | cell_updated | cell_deleted | cell_status | cell_output, and
// sandbox.warning (when set) says that cells run unsandboxed or cannot run, and why.

import { highlight } from "./highlight.js";
import { themed } from "./theme.js";

const STATUS_LABELS = {
  idle: "idle",
  running: "running",
  success: "success",
  error: "error",
  blocked: "blocked",
};

// --- Plotly, loaded on first use -------------------------------------------------------
let plotlyPromise = null;
export function loadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyPromise) {
    plotlyPromise = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = "/vendor/plotly.min.js";
      s.async = true;
      s.onload = () => (window.Plotly ? resolve(window.Plotly) : reject(new Error("Plotly did not load")));
      s.onerror = () => {
        plotlyPromise = null;
        reject(new Error("could not load /vendor/plotly.min.js"));
      };
      document.head.appendChild(s);
    });
  }
  return plotlyPromise;
}

// --- HTML tables from the kernel, cleaned before they reach the page --------------------
const TABLE_TAGS = new Set([
  "TABLE", "THEAD", "TBODY", "TFOOT", "TR", "TH", "TD", "CAPTION", "COLGROUP", "COL",
  "BR", "SPAN", "B", "I", "EM", "STRONG", "SMALL", "CODE", "DIV", "P",
]);
const TABLE_ATTRS = new Set(["colspan", "rowspan", "scope", "class", "align"]);

export function sanitizeTable(html) {
  const tpl = document.createElement("template");
  tpl.innerHTML = html;
  const walk = (node) => {
    for (const child of [...node.childNodes]) {
      if (child.nodeType === Node.ELEMENT_NODE) {
        if (!TABLE_TAGS.has(child.tagName)) {
          // Unknown elements go; their text stays (scripts and styles go entirely).
          if (["SCRIPT", "STYLE", "IFRAME", "OBJECT", "TEMPLATE"].includes(child.tagName)) child.remove();
          else child.replaceWith(document.createTextNode(child.textContent));
          continue;
        }
        for (const attr of [...child.attributes]) {
          if (!TABLE_ATTRS.has(attr.name.toLowerCase())) child.removeAttribute(attr.name);
        }
        walk(child);
      } else if (child.nodeType !== Node.TEXT_NODE) {
        child.remove();
      }
    }
  };
  walk(tpl.content);
  return tpl.content;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c) node.append(c);
  return node;
}

function renderOutput(out) {
  switch (out.type) {
    case "stdout":
    case "stderr":
      return el("pre", { class: `out out-${out.type}`, text: out.text });
    case "text":
      return el("pre", { class: "out out-text", text: out.text });
    case "table": {
      const wrap = el("div", { class: "out out-table" });
      const scroller = el("div", { class: "table-scroll", tabindex: "0", "aria-label": "Table output" });
      scroller.append(sanitizeTable(out.html || ""));
      wrap.append(scroller);
      if (out.rows !== undefined) {
        wrap.append(el("div", { class: "out-meta", text: `${out.rows} rows × ${out.columns} columns` }));
      }
      return wrap;
    }
    case "plotly": {
      const wrap = el("div", { class: "out out-plotly" });
      // A figure, not an image: the chart's toolbar inside it can be used from the keyboard.
      const plot = el("div", { class: "plot", role: "figure", "aria-label": figureTitle(out.figure) });
      wrap.append(plot);
      loadPlotly()
        .then((Plotly) => {
          const fig = out.figure || {};
          const layout = themed({ autosize: true, margin: { l: 48, r: 16, t: 48, b: 40 }, ...(fig.layout || {}) });
          delete layout.width;
          // No "Share chart" (it uploads to Plotly's cloud, which this page may not reach).
          return Plotly.newPlot(plot, fig.data || [], layout,
            { responsive: true, displaylogo: false, showSendToCloud: false, showEditInChartStudio: false });
        })
        .then(() => wrap.classList.add("rendered"))
        .catch((err) => {
          plot.replaceWith(el("pre", { class: "out out-error", text: `Chart not shown: ${err.message}` }));
        });
      return wrap;
    }
    case "error": {
      const wrap = el("div", { class: "out out-error", role: "group", "aria-label": "Error output" });
      wrap.append(el("div", { class: "err-head", text: `${out.ename}: ${out.evalue}` }));
      if (out.traceback) {
        const det = el("details", { class: "traceback" });
        det.append(el("summary", { text: "Traceback" }), el("pre", { text: out.traceback }));
        wrap.append(det);
      }
      return wrap;
    }
    default:
      return el("pre", { class: "out", text: JSON.stringify(out, null, 2) });
  }
}

function figureTitle(fig) {
  const t = fig?.layout?.title;
  const text = typeof t === "string" ? t : t?.text;
  return text ? `Chart: ${text}` : "Chart";
}

export class NotebookView {
  constructor(root, { onStatus } = {}) {
    this.root = root;
    this.list = root.querySelector(".cells");
    this.empty = root.querySelector(".notebook-empty");
    this.counter = root.querySelector(".notebook-count");
    this.warning = root.querySelector(".sandbox-warning");
    this.onStatus = onStatus || (() => {});
    this.cells = new Map(); // id -> {data, node}
    this.version = -1;
  }

  clear() {
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
      // Bring the cell the assistant is working on into view (no jump when it is visible).
      if (msg.change === "cell_created" || msg.change === "cell_output" || cell.status === "running") {
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

  refreshEmpty() {
    const n = this.cells.size;
    this.empty.hidden = n > 0;
    if (this.counter) this.counter.textContent = n ? `${n} cell${n === 1 ? "" : "s"}` : "";
  }

  remove(id) {
    const entry = this.cells.get(id);
    if (!entry) return;
    entry.node.remove();
    this.cells.delete(id);
  }

  upsert(cell, index) {
    let entry = this.cells.get(cell.id);
    if (!entry) {
      const node = this.buildCell(cell.id);
      entry = { data: {}, node };
      this.cells.set(cell.id, entry);
      const before = Number.isInteger(index) ? this.list.children[index] : null;
      this.list.insertBefore(node, before || null);
      node.classList.add("cell-new");
      node.addEventListener("animationend", () => node.classList.remove("cell-new"), { once: true });
    } else if (Number.isInteger(index) && this.list.children[index] !== entry.node) {
      this.list.insertBefore(entry.node, this.list.children[index] || null);
    }
    const prev = entry.data;
    const data = { ...prev, ...cell };
    entry.data = data;
    this.fillCell(entry.node, data, prev);
  }

  buildCell(id) {
    const node = el("article", { class: "cell", "data-cell-id": id, tabindex: "-1" });
    node.innerHTML = `
      <header class="cell-head">
        <span class="cell-count" aria-label="Execution count"></span>
        <span class="cell-lang"></span>
        <span class="cell-id"></span>
        <span class="badge" role="status"></span>
      </header>
      <pre class="cell-code"><code></code></pre>
      <div class="cell-outputs" aria-live="polite"></div>`;
    return node;
  }

  fillCell(node, cell, prev) {
    node.dataset.status = cell.status || "idle";
    node.setAttribute("aria-label", `Cell ${cell.id}, ${cell.language || "python"}, ${cell.status || "idle"}`);
    node.querySelector(".cell-count").textContent =
      cell.status === "running" ? "[*]" : `[${cell.execution_count ?? " "}]`;
    node.querySelector(".cell-lang").textContent = cell.language === "sql" ? "SQL" : "Python";
    node.querySelector(".cell-id").textContent = `#${cell.id}`;
    const badge = node.querySelector(".badge");
    const status = cell.status || "idle";
    badge.className = `badge badge-${status}`;
    badge.textContent = STATUS_LABELS[status] || status;
    badge.title = status === "blocked" && cell.blocked_by ? `blocked by cell ${cell.blocked_by}` : "";
    if (status === "blocked" && cell.blocked_by) badge.textContent = `blocked by #${cell.blocked_by}`;
    if (prev.code !== cell.code || prev.language !== cell.language) {
      const code = node.querySelector(".cell-code code");
      code.textContent = cell.code || "";
      delete code.dataset.highlighted;
      highlight(code, cell.language || "python");
    }
    if (cell.outputs && JSON.stringify(prev.outputs) !== JSON.stringify(cell.outputs)) {
      const box = node.querySelector(".cell-outputs");
      box.replaceChildren(...cell.outputs.map(renderOutput));
    }
  }
}
