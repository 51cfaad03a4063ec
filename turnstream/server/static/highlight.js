// Syntax highlighting with highlight.js (a well-kept library; its ES-module build is copied into
// static/vendor/highlight by `make web-assets`, so it is served from this server, never a CDN, and
// nothing needs Node at run time). The core and each language's grammar load on first use. Where
// the files are absent (a build made without npm) code is shown as plain text.

const BASE = "/static/vendor/highlight";
const GRAMMARS = new Set(["python", "sql", "json", "bash", "shell", "javascript", "typescript", "yaml", "xml",
  "css", "markdown", "diff", "ini"]);
const ALIASES = {
  py: "python", python3: "python", sh: "bash", zsh: "bash", console: "shell", js: "javascript",
  mjs: "javascript", ts: "typescript", yml: "yaml", html: "xml", svg: "xml", md: "markdown", toml: "ini",
  duckdb: "sql", postgresql: "sql", postgres: "sql", sqlite: "sql", jsonl: "json", patch: "diff",
};

let core = null;
const grammars = new Map();

function loadCore() {
  core ??= import(`${BASE}/core.min.js`).then((m) => m.default).catch(() => null);
  return core;
}

async function withGrammar(language) {
  const hljs = await loadCore();
  if (!hljs) return null;
  if (!grammars.has(language)) {
    grammars.set(language, import(`${BASE}/languages/${language}.min.js`)
      .then((m) => {
        hljs.registerLanguage(language, m.default);
        return true;
      })
      .catch(() => false));
  }
  return (await grammars.get(language)) ? hljs : null;
}

// The grammar for a fence's or a cell's language name, or null.
export function grammarOf(name) {
  const n = String(name || "").toLowerCase();
  const language = ALIASES[n] ?? n;
  return GRAMMARS.has(language) ? language : null;
}

// Colours the text of a <code> element in `language` (once its grammar has loaded). Nothing
// happens if the element's text changed meanwhile, or the language is unknown.
export function highlight(code, language) {
  const grammar = grammarOf(language);
  if (!grammar || code.dataset.highlighted) return;
  const source = code.textContent;
  withGrammar(grammar).then((hljs) => {
    if (!hljs || code.textContent !== source) return;
    code.innerHTML = hljs.highlight(source, { language: grammar, ignoreIllegals: true }).value;
    code.dataset.highlighted = grammar;
  });
}

// Highlights every fenced block under `root` that names its language.
export function highlightAll(root) {
  for (const pre of root.querySelectorAll("pre[data-lang]")) {
    const code = pre.querySelector("code");
    if (code) highlight(code, pre.dataset.lang);
  }
}
