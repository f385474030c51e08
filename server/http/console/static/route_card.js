// One routing call: the menu with every option's probability as a bar, the evidence prior
// where the policy used one, the decision, tokens (prefilled vs cached) and latency.
import { h } from "./dom.js";

export function routeCard({ path, menu, probabilities, decision, usage, detail, arguments: args }) {
  const probs = probabilities || {};
  const prior = (detail && detail.prior) || {};
  const options = (menu && menu.length ? menu : Object.keys(probs)).slice();
  const hasPrior = Object.keys(prior).length > 0;
  const rows = options.map((option) => {
    const p = probs[option];
    const chosen = option === decision;
    return h("div", { class: `option${chosen ? " chosen" : ""}`, dataset: { option } },
      h("span", { class: "option-name", title: option }, chosen ? `▶ ${option}` : option),
      h("span", { class: "bar" }, h("span", {
        class: "fill", style: { width: `${p === undefined ? 0 : Math.max(0.5, p * 100).toFixed(1)}%` },
      })),
      h("span", { class: "p" }, p === undefined ? "–" : p.toFixed(3)),
      hasPrior ? h("span", { class: "prior", title: "evidence prior: bias added to this option's logit" },
        prior[option] === undefined ? "" : `prior ${prior[option] >= 0 ? "+" : ""}${prior[option].toFixed(2)}`) : null);
  });
  return h("div", { class: "route-card" },
    h("div", { class: "route-head" },
      h("span", { class: "kind" }, "route"),
      h("code", {}, path || "<root>"), " → ",
      h("strong", { class: "decision" }, decision || "?"),
      detail && detail.policy ? h("span", { class: "tag" }, detail.policy) : null,
      ...tags(detail)),
    h("div", { class: "menu" }, rows),
    args ? h("div", { class: "args" }, "arguments ", h("code", {}, JSON.stringify(args))) : null,
    usageLine(usage));
}

function tags(detail) {
  if (!detail) return [];
  const out = [];
  for (const key of ["backtrack", "fallback", "beam", "back_veto", "finish", "plan"]) {
    if (detail[key]) out.push(h("span", { class: "tag warn", title: JSON.stringify(detail[key]) }, key));
  }
  if (detail.is_reused) out.push(h("span", { class: "tag" }, "reused"));
  if (detail.speculation) out.push(h("span", { class: "tag", title: JSON.stringify(detail.speculation) }, "speculated"));
  return out;
}

export function usageLine(usage) {
  if (!usage) return null;
  const u = usage;
  const parts = [
    ["calls", u.model_calls], ["prompt", u.prompt_tokens], ["prefilled", u.prefill_tokens],
    ["cached", u.cached_tokens], ["generated", u.generated_tokens],
  ].filter(([, v]) => v !== undefined);
  return h("div", { class: "usage" },
    parts.map(([k, v]) => h("span", { class: `u-${k}` }, `${k} ${v}`)),
    u.latency_ms !== undefined ? h("span", { class: "u-latency" }, `${Number(u.latency_ms).toFixed(1)} ms`) : null);
}
