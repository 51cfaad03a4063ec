// The notebook's code editor: CodeMirror 6 with the Python and SQL modes, bundled by esbuild into
// turnstream/server/static/vendor/codemirror/editor.min.js (make web-assets). The page imports it
// on first use and falls back to a plain <textarea> when the bundle is absent.
//
//   const ed = createEditor({parent, doc, language, label, onChange, onKey})
//   ed.getCode(), ed.setCode(text), ed.setLanguage("python" | "sql"), ed.focus(), ed.hasFocus(),
//   ed.contentElement (the focusable element), ed.destroy()
//
// onKey(name) gets "run-next" (Shift+Enter), "run" (Ctrl/Cmd+Enter) and "leave" (Escape) and
// returns true when it handled the key.

import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import { PostgreSQL, sql } from "@codemirror/lang-sql";
import { HighlightStyle, bracketMatching, indentOnInput, syntaxHighlighting } from "@codemirror/language";
import { Compartment, EditorState } from "@codemirror/state";
import { tags as t } from "@lezer/highlight";
import {
  EditorView, drawSelection, highlightActiveLine, highlightSpecialChars, keymap, lineNumbers,
} from "@codemirror/view";

// The page's own code colours (app.css: --hl-*, light and dark), as in the chat's highlighted code.
const colours = HighlightStyle.define([
  { tag: [t.keyword, t.operatorKeyword, t.controlKeyword, t.definitionKeyword, t.moduleKeyword], color: "var(--hl-keyword)" },
  { tag: [t.string, t.special(t.string), t.regexp], color: "var(--hl-string)" },
  { tag: [t.number, t.bool, t.null, t.atom], color: "var(--hl-number)" },
  { tag: [t.comment, t.lineComment, t.blockComment], color: "var(--hl-comment)", fontStyle: "italic" },
  { tag: [t.function(t.definition(t.variableName)), t.definition(t.className)], color: "var(--hl-title)" },
  { tag: [t.standard(t.variableName), t.function(t.variableName), t.typeName], color: "var(--hl-builtin)" },
]);

function mode(language) {
  return language === "sql" ? sql({ dialect: PostgreSQL }) : python();
}

export function createEditor({ parent, doc = "", language = "python", label = "Code", onChange, onKey }) {
  const lang = new Compartment();
  const key = (name) => () => Boolean(onKey?.(name));
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(),
        highlightSpecialChars(),
        history(),
        drawSelection(),
        indentOnInput(),
        bracketMatching(),
        highlightActiveLine(),
        syntaxHighlighting(colours),
        // Before the default keys, so Shift+Enter and Mod+Enter run instead of adding a line.
        keymap.of([
          { key: "Shift-Enter", run: key("run-next") },
          { key: "Mod-Enter", run: key("run") },
          { key: "Escape", run: key("leave") },
          ...defaultKeymap, ...historyKeymap, indentWithTab,
        ]),
        lang.of(mode(language)),
        EditorView.lineWrapping, // long lines wrap, as the chat's code does: no sideways scrolling
        EditorView.contentAttributes.of({ "aria-label": label, "aria-multiline": "true" }),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) onChange?.(u.state.doc.toString());
        }),
      ],
    }),
  });
  return {
    contentElement: view.contentDOM,
    getCode: () => view.state.doc.toString(),
    setCode(text) {
      if (text === view.state.doc.toString()) return;
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    setLanguage(language) {
      view.dispatch({ effects: lang.reconfigure(mode(language)) });
    },
    focus: () => view.focus(),
    hasFocus: () => view.hasFocus,
    destroy: () => view.destroy(),
  };
}
