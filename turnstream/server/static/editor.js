// A cell's code editor: CodeMirror 6 (static/vendor/codemirror/editor.min.js, bundled by
// `make web-assets`) where the bundle is there, a plain <textarea> with the same keys where it is
// not (a build made without npm). Both offer the same small interface:
//   getCode(), setCode(text), setLanguage(language), focus(), hasFocus(), contentElement, destroy()
// and call onChange(code) on every edit and onKey("run-next" | "run" | "leave") for Shift+Enter,
// Ctrl/Cmd+Enter and Escape (returning true when the key was handled). Neither is reached by Tab.

const BUNDLE = "/static/vendor/codemirror/editor.min.js";
let loading = null;
let codemirror = null;

// Loads the bundle once (the page awaits this before it shows a notebook); resolves to whether
// CodeMirror is there.
export function loadEditor() {
  loading ??= import(BUNDLE).then((m) => (codemirror = m), () => null).then(Boolean);
  return loading;
}

function textareaEditor({ parent, doc, label, onChange, onKey }) {
  const area = document.createElement("textarea");
  area.className = "cell-textarea";
  area.spellcheck = false;
  area.value = doc;
  area.setAttribute("aria-label", label);
  const fit = () => {
    area.style.height = "auto";
    area.style.height = `${area.scrollHeight + 2}px`;
  };
  area.addEventListener("input", () => {
    fit();
    onChange?.(area.value);
  });
  area.addEventListener("keydown", (e) => {
    let name = null;
    if (e.key === "Enter" && e.shiftKey) name = "run-next";
    else if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) name = "run";
    else if (e.key === "Escape") name = "leave";
    if (name && onKey?.(name)) e.preventDefault();
  });
  parent.append(area);
  requestAnimationFrame(fit);
  return {
    contentElement: area,
    getCode: () => area.value,
    setCode(text) {
      if (text !== area.value) {
        area.value = text;
        fit();
      }
    },
    setLanguage() {},
    focus: () => area.focus(),
    hasFocus: () => document.activeElement === area,
    destroy: () => area.remove(),
  };
}

// An editor in `parent`; CodeMirror when loadEditor() has loaded it. Tab never enters it by
// itself: its text is out of the tab order (the cell around it is in it, and Enter there, or a
// click, goes in), so a keyboard user passing by cannot indent code without knowing.
export function createEditor(options) {
  let editor = null;
  if (codemirror) {
    try {
      editor = codemirror.createEditor(options);
    } catch {
      /* a broken bundle: the text box below */
    }
  }
  editor ??= textareaEditor(options);
  editor.contentElement.tabIndex = -1;
  return editor;
}
