// Small DOM helpers shared by the page's modules.

export const $ = (sel, root = document) => root.querySelector(sel);

// h("div", {class: "x", text: "hi", onclick: fn}, child, …): an element with attributes,
// listeners (on…) and children; null, undefined and false are skipped.
export function h(tag, attrs = {}, ...children) {
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

// Says `text` to screen readers (the polite live region).
export function announce(text) {
  const live = $("#announcer");
  live.textContent = "";
  requestAnimationFrame(() => (live.textContent = text));
}

// A short message in the corner; `action` ({label, run}) adds a button (e.g. Undo).
export function toast(text, kind = "error", { action = null, ms = 6000 } = {}) {
  const t = h("div", { class: `toast toast-${kind}`, role: kind === "error" ? "alert" : "status" },
    h("span", { text }));
  if (action) {
    t.append(h("button", { type: "button", class: "btn btn-small", text: action.label, onclick: () => {
      t.remove();
      action.run();
    } }));
  }
  $("#toasts").append(t);
  setTimeout(() => t.remove(), ms);
  return t;
}

// A duration for people: 0.0009 -> "<1 ms", 0.38 -> "380 ms", 29.9982 -> "30 s", 75 -> "1 min 15 s".
export function seconds(s) {
  if (!Number.isFinite(s) || s < 0) return "";
  if (s < 0.001) return "<1 ms";
  if (s < 1) return `${Number((s * 1000).toPrecision(2))} ms`;
  if (s < 60) return `${Number(s.toPrecision(3))} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}
