// A cell's outputs as the notebook pane shows them: printed text, values, tables (the kernel's
// HTML, cleaned), Plotly charts (Plotly loaded on first use) and errors with their traceback.

import { h } from "./dom.js";
import { fitChart, themed } from "./theme.js";

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

export function renderOutput(out) {
  switch (out.type) {
    case "stdout":
    case "stderr":
      return h("pre", { class: `out out-${out.type}`, text: out.text });
    case "text":
      return h("pre", { class: "out out-text", text: out.text });
    case "table": {
      const wrap = h("div", { class: "out out-table" });
      const scroller = h("div", { class: "table-scroll", tabindex: "0", "aria-label": "Table output" });
      scroller.append(sanitizeTable(out.html || ""));
      wrap.append(scroller);
      if (out.rows !== undefined) {
        wrap.append(h("div", { class: "out-meta", text: `${out.rows} rows × ${out.columns} columns` }));
      }
      return wrap;
    }
    case "plotly": {
      const wrap = h("div", { class: "out out-plotly" });
      // A figure, not an image: the chart's toolbar inside it can be used from the keyboard.
      const plot = h("div", { class: "plot", role: "figure", "aria-label": figureTitle(out.figure) });
      wrap.append(plot);
      loadPlotly()
        .then((Plotly) => {
          const fig = out.figure || {};
          const layout = themed({ autosize: true, margin: { l: 48, r: 16, t: 48, b: 40 }, ...(fig.layout || {}) });
          delete layout.width;
          // No "Share chart" (it uploads to Plotly's cloud, which this page may not reach).
          return Plotly.newPlot(plot, fig.data || [], layout,
            { responsive: true, displaylogo: false, showSendToCloud: false, showEditInChartStudio: false })
            .then(() => fitChart(Plotly, plot));
        })
        .then(() => wrap.classList.add("rendered"))
        .catch((err) => {
          plot.replaceWith(h("pre", { class: "out out-error", text: `Chart not shown: ${err.message}` }));
        });
      return wrap;
    }
    case "error": {
      const wrap = h("div", { class: "out out-error", role: "group", "aria-label": "Error output" });
      wrap.append(h("div", { class: "err-head", text: `${out.ename}: ${out.evalue}` }));
      if (out.traceback) {
        const det = h("details", { class: "traceback" });
        det.append(h("summary", { text: "Traceback" }), h("pre", { text: out.traceback }));
        wrap.append(det);
      }
      return wrap;
    }
    default:
      return h("pre", { class: "out", text: JSON.stringify(out, null, 2) });
  }
}

function figureTitle(fig) {
  const t = fig?.layout?.title;
  const text = typeof t === "string" ? t : t?.text;
  return text ? `Chart: ${text}` : "Chart";
}
