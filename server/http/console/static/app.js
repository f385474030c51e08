// The console's entry: a hash router (#/sessions, #/session/ID, #/catalogs, #/catalog/ID) and
// the login form shown when the server answers 401.
import { ApiError, AuthRequired, apiKey, setApiKey } from "./api.js";
import { clear, h } from "./dom.js";
import { catalogPage, catalogsPage } from "./catalogs_page.js";
import { sessionPage } from "./session_page.js";
import { sessionsPage } from "./sessions_page.js";

const view = document.getElementById("view");
const login = document.getElementById("login");
const loginForm = document.getElementById("login-form");
const loginError = document.getElementById("login-error");
const forgetKey = document.getElementById("forget-key");
let current = null;  // the AbortController of the page shown

function onAuth(err) {
  if (err instanceof AuthRequired) {
    login.hidden = false;
    view.hidden = true;
    if (apiKey()) { loginError.hidden = false; loginError.textContent = "That key was refused."; }
    document.getElementById("api-key").focus();
    return;
  }
  if (!(err instanceof ApiError)) console.error(err);
  clear(view, h("p", { class: "error" }, String(err.message || err)));
}

function show() {
  if (current) current.abort();
  current = new AbortController();
  login.hidden = true;
  view.hidden = false;
  forgetKey.hidden = !apiKey();
  const [path, queryText] = (location.hash.slice(1) || "/sessions").split("?");
  const query = new URLSearchParams(queryText || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.classList.toggle("active", parts[0] && parts[0].startsWith(a.dataset.nav.replace(/s$/, "")));
  }
  const ctx = { signal: current.signal, onAuth, query };
  clear(view, h("p", { class: "muted" }, "Loading…"));
  let page;
  if (parts[0] === "session" && parts[1]) page = sessionPage(view, parts[1], ctx);
  else if (parts[0] === "catalogs") page = catalogsPage(view, ctx);
  else if (parts[0] === "catalog" && parts[1]) page = catalogPage(view, parts[1], ctx);
  else page = sessionsPage(view, ctx);
  Promise.resolve(page).catch(onAuth);
}

loginForm.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = document.getElementById("api-key");
  setApiKey(input.value.trim());
  input.value = "";
  loginError.hidden = true;
  show();
});
forgetKey.addEventListener("click", () => { setApiKey(null); show(); });
window.addEventListener("hashchange", show);
show();
