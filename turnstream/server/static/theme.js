// The page follows the system's light or dark theme (CSS `prefers-color-scheme`); charts follow
// it too: Plotly draws with the page's own colours, and charts already drawn are restyled when
// the theme changes. It also fits what CSS cannot reach to narrow screens: a chart's title
// (drawn by Plotly, on one line) and the composer's placeholder (an attribute).

const media = matchMedia("(prefers-color-scheme: dark)");

function colour(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

function axisKeys(layout) {
  const keys = Object.keys(layout || {}).filter((k) => /^[xy]axis\d*$/.test(k));
  return keys.length ? keys : ["xaxis", "yaxis"];
}

// Layout settings (Plotly's dotted names) that paint a figure in the page's colours.
export function plotlyTheme(layout = {}) {
  const text = colour("--text");
  const line = colour("--line");
  const update = {
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    "font.color": text,
    "title.font.color": text,
    "legend.font.color": text,
    "hoverlabel.bgcolor": colour("--panel"),
    "hoverlabel.font.color": text,
  };
  for (const axis of axisKeys(layout)) {
    Object.assign(update, {
      [`${axis}.gridcolor`]: line,
      [`${axis}.linecolor`]: line,
      [`${axis}.zerolinecolor`]: line,
      [`${axis}.tickfont.color`]: text,
      [`${axis}.title.font.color`]: text,
    });
  }
  return update;
}

// `layout` with the theme written into it (for Plotly.newPlot, which takes nested objects).
export function themed(layout) {
  const out = structuredClone(layout || {});
  for (const [path, value] of Object.entries(plotlyTheme(out))) {
    const keys = path.split(".");
    let at = out;
    for (const k of keys.slice(0, -1)) {
      if (typeof at[k] === "string") at[k] = { text: at[k] }; // a title given as a plain string
      at = at[k] ??= {};
    }
    at[keys.at(-1)] = value;
  }
  return out;
}

// Restyles every chart on the page when the system theme changes.
media.addEventListener("change", () => {
  for (const plot of document.querySelectorAll(".js-plotly-plot")) {
    window.Plotly?.relayout(plot, plotlyTheme(plot.layout));
  }
});

export function isDark() {
  return media.matches;
}

// --- narrow screens -----------------------------------------------------------------------
// Plotly draws a title on one line and cuts what passes the chart's edges (a long title on a
// phone). fitChart wraps it at word breaks to the room its alignment leaves (Plotly draws <br> as
// a new line), in a smaller font when one word alone is still wider, puts the lines in a top
// margin grown to hold them, and does it again whenever the chart's width changes (a pane shown,
// a phone turned); a title that fits again gets its own settings back.
const ruler = document.createElement("canvas").getContext("2d");
const TITLE_GAP = 10; // px above the title, and (with a little more) below it
const MIN_TITLE_SIZE = 10;
const LINE_HEIGHT = 1.3; // Plotly's spacing of a text's lines, in ems

function textWidth(text, size, family) {
  ruler.font = `${size}px ${family}`;
  return ruler.measureText(text.replace(/<[^>]*>/g, "")).width;
}

// `text` as lines no wider than `width` where its words allow (a line break it has is kept).
function wrapTitle(text, width, size, family) {
  const lines = [];
  for (const part of text.split(/<br\s*\/?>/i)) {
    let line = "";
    for (const word of part.split(/\s+/).filter(Boolean)) {
      const longer = line ? `${line} ${word}` : word;
      if (line && textWidth(longer, size, family) > width) {
        lines.push(line);
        line = word;
      } else line = longer;
    }
    lines.push(line);
  }
  return lines;
}

// The width a title may take in a chart `width` wide, from where it is anchored.
function titleRoom(title, width) {
  const x = Number.isFinite(title.x) ? title.x : 0.5;
  const anchor = title.xanchor && title.xanchor !== "auto" ? title.xanchor
    : x < 1 / 3 ? "left" : x > 2 / 3 ? "right" : "center";
  const room = anchor === "left" ? (1 - x) * width : anchor === "right" ? x * width : 2 * Math.min(x, 1 - x) * width;
  return room - 2 * TITLE_GAP;
}

export function fitChart(Plotly, plot) {
  const title = plot.layout?.title;
  const text = typeof title === "string" ? title : title?.text;
  const full = plot._fullLayout?.title;
  if (!text || !full) return null;
  const size = full.font?.size || 17;
  const family = full.font?.family || "sans-serif";
  const own = { "title.text": text, "title.font.size": title?.font?.size ?? null, "title.y": title?.y ?? null,
    "title.yref": title?.yref ?? null, "title.yanchor": title?.yanchor ?? null,
    "margin.t": plot.layout.margin?.t ?? null };
  const ownTop = plot._fullLayout.margin?.t ?? 0;
  let width = 0;
  let shown = "own";
  const observer = new ResizeObserver(() => fit());
  function fit() {
    if (!plot.isConnected) {
      observer.disconnect();
      return null;
    }
    const w = plot.clientWidth;
    if (!w || w === width) return null; // hidden, or no change
    width = w;
    const room = titleRoom(full, w);
    let fitted = size;
    let lines = wrapTitle(text, room, fitted, family);
    while (fitted > MIN_TITLE_SIZE && lines.some((l) => textWidth(l, fitted, family) > room)) {
      fitted -= 1;
      lines = wrapTitle(text, room, fitted, family);
    }
    const fits = lines.length === 1 && fitted === size;
    const key = fits ? "own" : `${lines.join("<br>")}@${fitted}`;
    if (key === shown) return null;
    shown = key;
    if (fits) return Plotly.relayout(plot, own);
    // Anchored by its middle, Plotly places a text's first line there and the others below it:
    // the first line's middle goes a gap and half a line below the chart's top.
    const line = LINE_HEIGHT * fitted;
    const height = plot._fullLayout.height || plot.clientHeight;
    return Plotly.relayout(plot, { "title.text": lines.join("<br>"), "title.font.size": fitted,
      "title.yref": "container", "title.yanchor": "middle", "title.y": 1 - (TITLE_GAP + line / 2) / height,
      "margin.t": Math.max(ownTop, Math.ceil(lines.length * line + 3 * TITLE_GAP)) });
  }
  const first = fit();
  observer.observe(plot);
  return first; // resolves once the title fits the chart as drawn now (null: nothing to change)
}

// A placeholder is an attribute: a field with a short one (data-placeholder-short) shows it on
// narrow screens, where the long one would be cut.
const narrow = matchMedia("(max-width: 600px)");
function fitPlaceholders() {
  for (const field of document.querySelectorAll("[data-placeholder-short]")) {
    field.dataset.placeholderLong ??= field.placeholder;
    field.placeholder = narrow.matches ? field.dataset.placeholderShort : field.dataset.placeholderLong;
  }
}
narrow.addEventListener("change", fitPlaceholders);
fitPlaceholders();
