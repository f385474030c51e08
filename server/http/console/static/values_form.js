// The form for a call waiting for values (the pending call's `missing_values`): one input per
// value, typed by its `values_schema` (number/integer: a number input, boolean: a checkbox,
// enum: a select, anything else: text). Kept simple on purpose: an array is typed as JSON
// ([1, 2]) or as comma-separated items, an object as JSON; the server checks every value
// against the leaf's schema, and its refusal is shown in its own words.
import { AuthRequired } from "./api.js";
import { h } from "./dom.js";

const ABSENT = Symbol("absent");  // an empty input: left out, so the server names it as needed

function kindOf(schema) {
  if (Array.isArray(schema.enum)) return "enum";
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  return type || "string";
}

function parsedOrText(text) {
  try { return JSON.parse(text); } catch { return text; }  // the server says what is wrong
}

function listItems(text, itemSchema) {
  if (text.startsWith("[")) return parsedOrText(text);
  const kind = kindOf(itemSchema || {});
  return text.split(",").map((s) => s.trim()).filter(Boolean).map((item) => {
    if ((kind === "number" || kind === "integer") && item !== "" && Number.isFinite(Number(item))) return Number(item);
    if (kind === "boolean" && (item === "true" || item === "false")) return item === "true";
    return item;
  });
}

function field(name, schema) {
  const id = `value-${name}`;
  const kind = kindOf(schema);
  let input;
  if (kind === "enum") {
    input = h("select", { id, name }, h("option", { value: "" }, "choose…"),
      schema.enum.map((v, i) => h("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
  } else if (kind === "boolean") {
    input = h("input", { id, name, type: "checkbox" });
  } else if (kind === "number" || kind === "integer") {
    input = h("input", { id, name, type: "number", step: kind === "integer" ? "1" : "any" });
  } else {
    const hint = kind === "array" ? "JSON [a, b] or a, b, c" : kind === "object" ? "JSON {…}" : "";
    input = h("input", { id, name, type: "text", placeholder: hint || null });
  }
  function read() {
    if (kind === "boolean") return input.checked;
    const text = input.value.trim();
    if (text === "") return ABSENT;
    if (kind === "enum") return schema.enum[Number(text)];
    if (kind === "number" || kind === "integer") return Number(text);
    if (kind === "array") return listItems(text, schema.items);
    if (kind === "object") return parsedOrText(text);
    return input.value;
  }
  const row = h("div", { class: "value-field", dataset: { name } },
    h("label", { for: id }, h("code", {}, name)), input,
    schema.description ? h("span", { class: "muted" }, schema.description) : null);
  return { row, read };
}

// `onSend(values)` posts them and re-renders the page; when it throws, the form stays as typed
// and shows why (an AuthRequired goes to `onAuth`: the login form).
export function valuesForm(pending, { onSend, onAuth }) {
  const schema = pending.values_schema || { properties: {} };
  const fields = pending.missing_values.map((name) => [name, field(name, (schema.properties || {})[name] || {})]);
  const error = h("p", { id: "values-error", class: "error", hidden: true });
  const send = h("button", { id: "send-values", class: "approve", type: "submit" }, "Send");
  async function submit(ev) {
    ev.preventDefault();
    const values = {};
    for (const [name, f] of fields) {
      const value = f.read();
      if (value !== ABSENT) values[name] = value;
    }
    send.disabled = true;
    error.hidden = true;
    try {
      await onSend(values);
    } catch (err) {
      if (err instanceof AuthRequired) { onAuth(err); return; }
      error.hidden = false;
      error.textContent = String(err.message || err);
      send.disabled = false;
    }
  }
  return h("form", { class: "values-form", onsubmit: submit },
    fields.map(([, f]) => f.row), error, h("div", { class: "actions" }, send));
}
