// Building elements from data: text always goes in as text (never as HTML).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "style") Object.assign(el.style, value);  // CSSOM: allowed by the CSP
    else el.setAttribute(name, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// Characters that change how text looks without being seen (bidi overrides such as U+202E,
// zero-width and other format characters, controls, separators, surrogates, private-use and
// unassigned code points) are shown as \uXXXX escapes, as the server's arguments_text does
// (server/http/shown_text.py): what a person approves is what they read.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/gu;

export function visible(text) {
  return String(text).replace(HIDDEN, (ch) => ch === "\n" ? ch
    : ch.codePointAt(0) > 0xffff ? `\\U${ch.codePointAt(0).toString(16).padStart(8, "0")}`
    : `\\u${ch.codePointAt(0).toString(16).padStart(4, "0")}`);
}

export function json(value) {
  return visible(JSON.stringify(value, null, 2));
}

export function shortJson(value, max = 120) {
  const text = visible(JSON.stringify(value));
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function ago(unixSeconds) {
  const s = Math.max(0, Date.now() / 1000 - unixSeconds);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(unixSeconds * 1000).toISOString().slice(0, 16).replace("T", " ");
}

export function statusBadge(status) {
  return h("span", { class: `badge status-${status}` }, status);
}
