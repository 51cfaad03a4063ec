// A small Markdown renderer for the model's text. Safety first: the source is HTML-escaped
// before any markup is added, so the only tags in the output are the ones made here, and
// links are kept only for http(s) and mailto addresses.
//
// Covered: paragraphs, line breaks, headings, fenced code, inline code, bold, italic,
// strike-through, links, bullet and numbered lists (one level of nesting by indent),
// block quotes, horizontal rules and simple pipe tables. Unfinished markup (common while a
// reply is still streaming) is left as plain text.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

function safeUrl(escapedUrl) {
  // The URL arrives escaped; undo only &amp; to test the scheme, keep the escaped form.
  const raw = escapedUrl.replace(/&amp;/g, "&").trim();
  if (/^(https?:|mailto:)/i.test(raw) || raw.startsWith("#") || raw.startsWith("/")) return escapedUrl.trim();
  return null;
}

// Inline markup over already-escaped text. Code spans are cut out first so nothing inside
// them is interpreted.
function inline(escaped) {
  const codes = [];
  let s = escaped.replace(/`([^`\n]+)`/g, (_, code) => {
    codes.push(code);
    return `\u0000${codes.length - 1}\u0000`;
  });
  s = s.replace(/\[([^\]\n]+)\]\(((?:[^()\s]|\([^()\s]*\))+)\)/g, (whole, label, url) => {
    const href = safeUrl(url);
    if (!href) return label;
    return `<a href="${href}" target="_blank" rel="noopener noreferrer">${label}</a>`;
  });
  s = s.replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
  s = s.replace(/__([^_\n]+)__/g, "<strong>$1</strong>");
  s = s.replace(/(^|[^*\w])\*([^*\s][^*\n]*?)\*(?!\w)/g, "$1<em>$2</em>");
  s = s.replace(/(^|[^_\w])_([^_\s][^_\n]*?)_(?!\w)/g, "$1<em>$2</em>");
  s = s.replace(/~~([^~\n]+)~~/g, "<del>$1</del>");
  // eslint-disable-next-line no-control-regex
  return s.replace(/\u0000(\d+)\u0000/g, (_, i) => `<code>${codes[Number(i)]}</code>`);
}

const RE_FENCE = /^\s{0,3}(```|~~~)\s*([\w+-]*)\s*$/;
const RE_HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RE_HR = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const RE_BULLET = /^(\s*)[-*+]\s+(.*)$/;
const RE_NUMBER = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const RE_QUOTE = /^\s{0,3}&gt;\s?(.*)$/;
const RE_TABLE_SEP = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|")) s = s.slice(0, -1);
  return s.split("|").map((c) => c.trim());
}

function renderList(lines, start) {
  // Collects consecutive list lines (and their continuation lines) into nested lists.
  const first = lines[start];
  const ordered = !RE_BULLET.test(first);
  const baseIndent = (ordered ? RE_NUMBER.exec(first)[1] : RE_BULLET.exec(first)[1]).length;
  const items = [];
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const b = RE_BULLET.exec(line);
    const n = RE_NUMBER.exec(line);
    const m = b || n;
    if (m && m[1].length < baseIndent) break; // back to an outer list
    if (m && m[1].length <= baseIndent + 1) {
      if (Boolean(n) !== ordered && m[1].length === baseIndent) break;
      items.push({ text: b ? b[2] : n[3], start: n ? Number(n[2]) : null, children: [] });
      i += 1;
      continue;
    }
    if (m && items.length) {
      const nested = renderList(lines, i);
      items[items.length - 1].children.push(nested.html);
      i = nested.end;
      continue;
    }
    if (line.trim() && items.length && /^\s+/.test(line)) {
      items[items.length - 1].text += ` ${line.trim()}`;
      i += 1;
      continue;
    }
    break;
  }
  const tag = ordered ? "ol" : "ul";
  const startAttr = ordered && items[0] && items[0].start !== 1 ? ` start="${items[0].start}"` : "";
  const body = items.map((it) => `<li>${inline(it.text)}${it.children.join("")}</li>`).join("");
  return { html: `<${tag}${startAttr}>${body}</${tag}>`, end: i };
}

export function renderMarkdown(source) {
  const lines = escapeHtml(source ?? "").replace(/\r\n?/g, "\n").split("\n");
  const out = [];
  let para = [];
  const flush = () => {
    if (para.length) out.push(`<p>${para.map(inline).join("<br>")}</p>`);
    para = [];
  };
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = RE_FENCE.exec(line);
    if (fence) {
      flush();
      const body = [];
      i += 1;
      while (i < lines.length && !new RegExp(`^\\s{0,3}${fence[1]}\\s*$`).test(lines[i])) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1; // the closing fence (or the end of an unfinished block)
      const lang = fence[2] ? ` data-lang="${fence[2]}"` : "";
      out.push(`<pre class="md-code"${lang}><code>${body.join("\n")}</code></pre>`);
      continue;
    }
    if (!line.trim()) {
      flush();
      i += 1;
      continue;
    }
    const h = RE_HEADING.exec(line);
    if (h) {
      flush();
      const level = Math.min(h[1].length + 2, 6); // chat headings stay modest: # is <h3>
      out.push(`<h${level}>${inline(h[2])}</h${level}>`);
      i += 1;
      continue;
    }
    if (RE_HR.test(line)) {
      flush();
      out.push("<hr>");
      i += 1;
      continue;
    }
    if (RE_BULLET.test(line) || RE_NUMBER.test(line)) {
      flush();
      const list = renderList(lines, i);
      out.push(list.html);
      i = list.end;
      continue;
    }
    if (RE_QUOTE.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && RE_QUOTE.test(lines[i])) {
        quoted.push(RE_QUOTE.exec(lines[i])[1]);
        i += 1;
      }
      // The quoted text is already escaped; render it as inline paragraphs.
      out.push(`<blockquote>${quoted.map(inline).join("<br>")}</blockquote>`);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && RE_TABLE_SEP.test(lines[i + 1])) {
      flush();
      const head = splitRow(line);
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
        rows.push(splitRow(lines[i]));
        i += 1;
      }
      const th = head.map((c) => `<th>${inline(c)}</th>`).join("");
      const trs = rows.map((r) => `<tr>${r.map((c) => `<td>${inline(c)}</td>`).join("")}</tr>`).join("");
      out.push(`<div class="md-table"><table><thead><tr>${th}</tr></thead><tbody>${trs}</tbody></table></div>`);
      continue;
    }
    para.push(line);
    i += 1;
  }
  flush();
  return out.join("");
}
