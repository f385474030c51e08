// The sessions list: status, filters, live updates (a poll of the list, plus each running
// session's event stream for its step count and its end).
import { api, streamEvents } from "./api.js";
import { ago, clear, h, statusBadge } from "./dom.js";

const STATUSES = ["", "running", "paused", "done", "limit", "error", "cancelled"];
const POLL_MS = 2000;
const MAX_STREAMS = 10;

export function sessionsPage(root, { signal, onAuth, query }) {
  const filter = { status: query.get("status") || "", catalog: query.get("catalog") || "", text: "" };
  const steps = new Map();  // session id → transitions seen on its stream
  const streams = new Map();  // session id → AbortController
  let sessions = [];
  let catalogs = [];

  const statusSelect = h("select", { id: "filter-status", onchange: () => { filter.status = statusSelect.value; refresh(); } },
    STATUSES.map((s) => h("option", { value: s, selected: s === filter.status }, s || "any status")));
  const catalogSelect = h("select", { id: "filter-catalog", onchange: () => { filter.catalog = catalogSelect.value; refresh(); } },
    h("option", { value: "" }, "any catalog"));
  const textInput = h("input", { id: "filter-text", type: "search", placeholder: "filter by task or id",
    oninput: () => { filter.text = textInput.value.toLowerCase(); renderRows(); } });
  const body = h("tbody", { id: "sessions-body" });
  const summary = h("span", { class: "muted", id: "sessions-count" });

  clear(root,
    h("div", { class: "toolbar" }, h("h2", {}, "Sessions"), statusSelect, catalogSelect, textInput, summary),
    h("table", { class: "grid sessions" },
      h("thead", {}, h("tr", {}, ["session", "status", "task", "catalog", "live events", "updated"].map((c) => h("th", {}, c)))),
      body));

  async function refresh() {
    const params = new URLSearchParams({ limit: "200" });
    if (filter.status) params.set("status", filter.status);
    if (filter.catalog) params.set("catalog", filter.catalog);
    try {
      const [list, cats] = await Promise.all([api(`/v1/sessions?${params}`), catalogs.length ? null : api("/v1/catalogs")]);
      sessions = list.sessions;
      if (cats) {
        catalogs = cats.catalogs;
        for (const c of catalogs) catalogSelect.append(h("option", { value: c.id, selected: c.id === filter.catalog }, `${c.name} (${c.id.slice(0, 8)})`));
      }
      renderRows();
      followRunning();
    } catch (err) {
      if (!signal.aborted) onAuth(err);
    }
  }

  function catalogName(id) {
    const c = catalogs.find((x) => x.id === id);
    return c ? c.name : id.slice(0, 12);
  }

  function renderRows() {
    const shown = sessions.filter((s) => !filter.text || s.task.toLowerCase().includes(filter.text) || s.id.includes(filter.text));
    clear(body, shown.length ? shown.map((s) => h("tr", { dataset: { sessionId: s.id, status: s.status } },
      h("td", {}, h("a", { href: `#/session/${encodeURIComponent(s.id)}` }, h("code", {}, s.id.slice(0, 12)))),
      h("td", {}, statusBadge(s.status)),
      h("td", { class: "task" }, s.task),
      h("td", {}, catalogName(s.catalog)),
      h("td", { class: "num live" }, steps.has(s.id) ? String(steps.get(s.id)) : ""),
      h("td", { class: "muted" }, ago(s.updated_unix))))
      : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No sessions match.")));
    summary.textContent = `${shown.length} of ${sessions.length} shown`;
  }

  function followRunning() {
    for (const s of sessions) {
      if (s.status !== "running" || streams.has(s.id) || streams.size >= MAX_STREAMS) continue;
      const controller = new AbortController();
      signal.addEventListener("abort", () => controller.abort());
      streams.set(s.id, controller);
      steps.set(s.id, 0);
      streamEvents(`/v1/sessions/${encodeURIComponent(s.id)}/events`, (m) => {
        if (m.event === "transition") { steps.set(s.id, (steps.get(s.id) || 0) + 1); renderRows(); }
        if (m.event === "end") { s.status = m.data.status; renderRows(); refresh(); }
      }, controller.signal).catch(() => {}).finally(() => streams.delete(s.id));
    }
  }

  refresh();
  const timer = setInterval(refresh, POLL_MS);
  signal.addEventListener("abort", () => clearInterval(timer));
}
