// One session: header, usage, the gate (Approve / Reject with the pending call's digest; a
// call waiting for values: their form, and Reject), the frame tree; live while it runs (the
// session's event stream).
import { api, streamEvents } from "./api.js";
import { clear, h, json, statusBadge } from "./dom.js";
import { usageLine } from "./route_card.js";
import { frameTree } from "./session_tree.js";
import { valuesForm } from "./values_form.js";

export function sessionPage(root, sessionId, { signal, onAuth }) {
  const openState = new Map();
  let view = null;
  let streaming = false;

  async function load() {
    view = await api(`/v1/sessions/${encodeURIComponent(sessionId)}`);
    render();
    if (view.status === "running") follow();
  }

  async function follow() {
    if (streaming || signal.aborted) return;
    streaming = true;
    const after = view.trace.length ? view.trace[view.trace.length - 1].seq : -1;
    try {
      await streamEvents(`/v1/sessions/${encodeURIComponent(sessionId)}/events?after=${after}`, (m) => {
        if (m.event === "transition" && !view.trace.some((e) => e.seq === m.data.seq)) {
          view.trace.push(m.data);
          render();
        }
      }, signal);
    } catch (err) {
      if (signal.aborted) return;
      onAuth(err);
    } finally {
      streaming = false;
    }
    if (!signal.aborted) await load();  // the stream ended: the session paused or finished
  }

  async function decide(action) {
    const digest = view.pending.digest;  // binds the approval to exactly the call shown
    for (const b of root.querySelectorAll(".gate button")) b.disabled = true;
    try {
      view = await api(`/v1/sessions/${encodeURIComponent(sessionId)}/${action}`, { method: "POST", body: { digest } });
      render();
      follow();
    } catch (err) {
      onAuth(err);
      showError(err);
    }
  }

  async function supply(values) {
    const digest = view.pending.digest;  // the call shown, waiting for exactly these values
    view = await api(`/v1/sessions/${encodeURIComponent(sessionId)}/values`, { method: "POST", body: { digest, values } });
    render();
    follow();
  }

  function showError(err) {
    const box = root.querySelector("#session-error");
    if (box) { box.hidden = false; box.textContent = String(err.message || err); }
  }

  function render() {
    const v = view;
    const isGated = v.status === "paused" && v.pending
      && (v.pending.is_gated || (v.pending.missing_values || []).length > 0);
    clear(root,
      h("p", {}, h("a", { href: "#/sessions" }, "← sessions")),
      h("div", { class: "card session-head" },
        h("h2", {}, "Session ", h("code", {}, v.id), " ", statusBadge(v.status)),
        h("p", { class: "task" }, v.task),
        h("p", { class: "muted" }, `catalog ${v.catalog} · ${v.num_steps} steps · ${v.calls.length} calls · `,
          `${v.num_format_failures} format failures`, v.auto_approve ? " · auto-approve" : ""),
        usageLine(v.usage),
        v.error ? h("p", { class: "error" }, v.error) : null,
        h("p", { id: "session-error", class: "error", hidden: true })),
      isGated ? gatePanel(v.pending) : null,
      h("h3", {}, "Run"),
      frameTree(v.trace, openState),
      v.result ? h("details", { class: "card" }, h("summary", {}, "Result"), h("pre", {}, json(v.result))) : null);
    root.dataset.status = v.status;
  }

  function gatePanel(pending) {
    const missing = pending.missing_values || [];
    const supplied = pending.supplied_values || [];
    const isAsking = missing.length > 0;  // approve is refused until the values are given
    return h("div", { class: "card gate", dataset: { asking: isAsking ? "values" : "approval" } },
      h("h3", {}, isAsking ? "Values needed" : "Confirmation gate"),
      h("p", {}, isAsking
        ? `The request held no value for ${missing.join(", ")}: give ${missing.length > 1 ? "them" : "it"} to go on with this call, or reject it.`
        : "The run waits for approval of exactly this call:"),
      h("dl", {},
        h("dt", {}, "leaf"), h("dd", {}, h("code", { class: "gate-path" }, pending.path)),
        h("dt", {}, "arguments"), h("dd", {}, h("pre", { class: "gate-arguments" }, pending.arguments_text || json(pending.arguments))),
        pending.written_values && pending.written_values.length ? h("dt", {}, "not from the request") : null,
        pending.written_values && pending.written_values.length
          ? h("dd", { class: "gate-written" }, `written by the model: ${pending.written_values.join(", ")}`) : null,
        supplied.length ? h("dt", {}, "given by you") : null,
        supplied.length ? h("dd", { class: "gate-supplied" }, supplied.join(", ")) : null,
        isAsking ? h("dt", {}, "missing") : null,
        isAsking ? h("dd", { class: "gate-missing" }, missing.join(", ")) : null,
        h("dt", {}, "call id"), h("dd", {}, h("code", {}, pending.call_id)),
        h("dt", {}, "digest"), h("dd", {}, h("code", { title: pending.digest }, `${pending.digest.slice(0, 16)}…`))),
      isAsking ? valuesForm(pending, { onSend: supply, onAuth }) : null,
      h("div", { class: "actions" },
        isAsking ? null : h("button", { id: "approve", class: "approve", type: "button", onclick: () => decide("approve") }, "Approve"),
        h("button", { id: "reject", class: "reject", type: "button", onclick: () => decide("reject") }, "Reject")));
  }

  return load();
}
