// A session's trace as a collapsible tree of frames: each frame's events in order, a child
// frame's block where it was pushed.
import { h, json, shortJson } from "./dom.js";
import { routeCard } from "./route_card.js";

export function frameTree(trace, openState) {
  const frames = new Map();
  const roots = [];
  for (const event of trace) {
    if (event.frame_id === null || event.frame_id === undefined) continue;
    if (!frames.has(event.frame_id)) {
      const frame = { id: event.frame_id, path: event.path, parent: event.parent_id, items: [], end: null };
      frames.set(event.frame_id, frame);
      const parent = frames.get(event.parent_id);
      if (parent) parent.items.push({ frame });
      else roots.push(frame);
    }
    const frame = frames.get(event.frame_id);
    if (event.kind === "pop_done" || event.kind === "pop_back") frame.end = event.kind.slice(4);
    if (event.kind === "finish") frame.end = frame.end || (event.detail && event.detail.status);
    frame.items.push({ event });
  }
  return h("div", { class: "frame-tree" }, roots.map((f) => frameBlock(f, openState)));
}

function frameBlock(frame, openState) {
  const numRoutes = frame.items.filter((i) => i.event && i.event.kind === "route").length;
  const isOpen = openState.has(frame.id) ? openState.get(frame.id) : true;
  const details = h("details", { class: "frame", open: isOpen, dataset: { frameId: frame.id } },
    h("summary", {},
      h("span", { class: "kind" }, "frame"),
      h("code", {}, frame.path || "<root>"),
      h("span", { class: "muted" }, ` #${frame.id} · ${numRoutes} routing call${numRoutes === 1 ? "" : "s"}`),
      frame.end ? h("span", { class: `tag end-${frame.end}` }, frame.end) : h("span", { class: "tag active" }, "active")),
    h("ol", { class: "events" }, frame.items.map((item) =>
      h("li", {}, item.frame ? frameBlock(item.frame, openState) : eventLine(item.event)))));
  details.addEventListener("toggle", () => openState.set(frame.id, details.open));
  return details;
}

function eventLine(e) {
  const seq = h("span", { class: "seq" }, `#${e.seq}`);
  switch (e.kind) {
    case "start":
      return h("div", { class: "event ev-start" }, seq, h("span", { class: "kind" }, "task"), (e.detail && e.detail.task) || "");
    case "push":
      return h("div", { class: "event ev-push" }, seq, h("span", { class: "kind" }, "enter"), h("code", {}, e.path));
    case "route":
      return h("div", { class: "event ev-route" }, seq, routeCard(e));
    case "leaf_pending":
      return h("div", { class: "event ev-call" }, seq, h("span", { class: "kind" }, "call"),
        h("code", {}, e.detail.leaf), h("pre", { class: "inline-json" }, json(e.arguments || {})),
        h("span", { class: "muted" }, ` call ${e.detail.call_id}`));
    case "leaf_result":
      return h("div", { class: `event ev-result${e.error ? " failed" : ""}` }, seq,
        h("span", { class: "kind" }, e.error ? "failed" : "result"), h("code", {}, e.detail.leaf), " = ",
        e.error ? h("span", { class: "error" }, e.error) : h("code", {}, shortJson(e.detail.result, 200)),
        e.detail.is_replayed ? h("span", { class: "tag" }, "replayed") : null);
    case "gate_pause":
      return h("div", { class: "event ev-gate" }, seq, h("span", { class: "kind" }, "gate"),
        "waits for approval: ", h("code", {}, e.detail.leaf));
    case "values_pause":
      return h("div", { class: "event ev-gate" }, seq, h("span", { class: "kind" }, "asks"),
        h("code", {}, e.detail.leaf), " needs ", (e.detail.missing_values || []).join(", "));
    case "values_supply":
      return h("div", { class: "event ev-values" }, seq, h("span", { class: "kind" }, "given"),
        (e.detail.supplied_values || []).join(", "), e.arguments ? h("code", {}, JSON.stringify(e.arguments)) : null);
    case "gate_approve":
    case "gate_reject":
      return h("div", { class: `event ev-${e.kind}` }, seq, h("span", { class: "kind" }, e.kind === "gate_approve" ? "approved" : "rejected"),
        "call ", h("code", {}, (e.detail && e.detail.call_id) || ""), " ", h("code", {}, JSON.stringify(e.arguments || {})));
    case "pop_done":
    case "pop_back":
      return h("div", { class: "event ev-pop" }, seq, h("span", { class: "kind" }, e.kind === "pop_done" ? "done" : "back"), h("code", {}, e.path || "<root>"));
    case "finish":
      return h("div", { class: "event ev-finish" }, seq, h("span", { class: "kind" }, "finish"), (e.detail && e.detail.status) || "");
    default:
      return h("div", { class: `event ev-${e.kind}` }, seq, h("span", { class: "kind" }, e.kind),
        e.error ? h("span", { class: "error" }, e.error) : null,
        e.detail && Object.keys(e.detail).length ? h("code", {}, shortJson(e.detail, 200)) : null);
  }
}
