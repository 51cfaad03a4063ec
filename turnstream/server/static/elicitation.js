// An MCP server's question in the middle of a tool call (a form elicitation): the question, and a
// small form made from the requested schema, a flat object whose properties are strings, numbers,
// integers, booleans or choices (an `enum`, or a `oneOf` of `const`s with titles), as MCP allows.
// Submit answers with the form's values as a JSON object; Decline answers that the user will not.

import { h } from "./dom.js";

let formCount = 0;

// The choices of a property as [value, label] pairs, or null when it is not a choice.
function choices(prop) {
  if (Array.isArray(prop.enum)) {
    const names = Array.isArray(prop.enumNames) ? prop.enumNames : [];
    return prop.enum.map((v, i) => [v, String(names[i] ?? v)]);
  }
  const options = prop.oneOf ?? prop.anyOf;
  if (Array.isArray(options) && options.length && options.every((o) => o && "const" in o)) {
    return options.map((o) => [o.const, String(o.title ?? o.const)]);
  }
  return null;
}

const INPUT_TYPES = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

// One field: its label, the control, and how to read its value back (undefined: left empty).
function field(key, prop, required, prefix) {
  const id = `${prefix}-${key}`;
  const label = String(prop.title ?? key.replace(/_/g, " "));
  const hint = prop.description ? h("span", { class: "elicit-hint muted", text: prop.description }) : null;
  const options = choices(prop);
  let control;
  let read;
  if (options) {
    control = h("select", { id, name: key, required });
    if (!required || prop.default === undefined) control.append(h("option", { value: "", text: required ? "Choose…" : "(none)" }));
    options.forEach(([value, text], i) => {
      const option = h("option", { value: String(i), text });
      if (prop.default !== undefined && value === prop.default) option.selected = true;
      control.append(option);
    });
    read = () => (control.value === "" ? undefined : options[Number(control.value)][0]);
  } else if (prop.type === "boolean") {
    control = h("input", { id, name: key, type: "checkbox" });
    control.checked = prop.default === true;
    read = () => control.checked;
  } else if (prop.type === "number" || prop.type === "integer") {
    control = h("input", { id, name: key, type: "number", required, step: prop.type === "integer" ? "1" : "any",
      min: prop.minimum, max: prop.maximum, value: prop.default });
    read = () => (control.value === "" ? undefined : Number(control.value));
  } else {
    control = h("input", { id, name: key, type: INPUT_TYPES[prop.format] ?? "text", required,
      minlength: prop.minLength, maxlength: prop.maxLength, value: prop.default });
    read = () => (control.value === "" ? undefined : control.value);
  }
  const row = prop.type === "boolean"
    ? h("div", { class: "elicit-field elicit-check" }, control, h("label", { for: id, text: label }), hint)
    : h("div", { class: "elicit-field" }, h("label", { for: id, text: required ? `${label} *` : label }), control, hint);
  return { key, row, control, read };
}

// The form of `elicitation` ({message, requested_schema}); `onAnswer` gets the body to post to
// the tool-results route ({content} or {approved: false}) and may throw (the form stays usable).
export function elicitationForm(toolName, elicitation, onAnswer) {
  formCount += 1;
  const schema = elicitation.requested_schema ?? {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = Object.entries(schema.properties ?? {}).map(([key, prop]) =>
    field(key, prop ?? {}, required.has(key), `elicit-${formCount}`));
  // no fields: a yes-or-no question (an MCP server asking to use the model)
  const submit = h("button", { type: "submit", class: "btn btn-approve", text: fields.length ? "Submit" : "Allow",
    "aria-label": `Submit the answer to ${toolName}` });
  const decline = h("button", { type: "button", class: "btn btn-deny", text: "Decline",
    "aria-label": `Decline to answer ${toolName}` });
  const form = h("form", { class: "elicit-form", "aria-label": `${toolName} asks: ${elicitation.message ?? ""}` },
    h("p", { class: "elicit-message", text: elicitation.message || `${toolName} asks for input.` }),
    ...fields.map((f) => f.row),
    h("div", { class: "elicit-buttons" }, submit, decline));
  const answer = async (body) => {
    for (const c of [submit, decline, ...fields.map((f) => f.control)]) c.disabled = true;
    try {
      await onAnswer(body);
    } catch {
      for (const c of [submit, decline, ...fields.map((f) => f.control)]) c.disabled = false;
    }
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!form.reportValidity()) return;
    const content = {};
    for (const f of fields) {
      const value = f.read();
      if (value !== undefined) content[f.key] = value;
    }
    answer({ content: JSON.stringify(content) });
  });
  decline.addEventListener("click", () => answer({ approved: false }));
  return { form, focus: () => (fields[0]?.control ?? submit).focus() };
}
