// The API client: every call carries the key from sessionStorage (never from the page's HTML).
const KEY_NAME = "stackroute.apiKey";

export class AuthRequired extends Error {}

export class ApiError extends Error {
  constructor(status, message) {
    super(`${status}: ${message}`);
    this.status = status;
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY_NAME);
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_NAME, key);
  else sessionStorage.removeItem(KEY_NAME);
}

function headers(extra = {}) {
  const out = { Accept: "application/json", ...extra };
  const key = apiKey();
  if (key) out.Authorization = `Bearer ${key}`;
  return out;
}

export async function api(path, { method = "GET", body } = {}) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.status === 401) throw new AuthRequired("the server asks for an API key");
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    const message = data && data.error ? data.error.message : response.statusText;
    throw new ApiError(response.status, message);
  }
  return data;
}

// Server-sent events over fetch (EventSource cannot send the Authorization header).
// Calls onEvent({event, id, data}) per event until the stream ends or `signal` aborts.
export async function streamEvents(path, onEvent, signal) {
  const response = await fetch(path, { headers: headers({ Accept: "text/event-stream" }), signal });
  if (response.status === 401) throw new AuthRequired("the server asks for an API key");
  if (!response.ok) throw new ApiError(response.status, response.statusText);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const message = { event: "message", id: null, data: "" };
      for (const line of block.split("\n")) {
        const colon = line.indexOf(":");
        if (colon <= 0) continue;
        const field = line.slice(0, colon);
        const text = line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") message.event = text;
        else if (field === "id") message.id = text;
        else if (field === "data") message.data += (message.data ? "\n" : "") + text;
      }
      if (!message.data) continue;
      try { message.data = JSON.parse(message.data); } catch { /* keep the text */ }
      onEvent(message);
    }
  }
}
