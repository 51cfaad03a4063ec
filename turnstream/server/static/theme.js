// The page follows the system's light or dark theme (CSS `prefers-color-scheme`); charts follow
// it too: Plotly draws with the page's own colours, and charts already drawn are restyled when
// the theme changes.

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
