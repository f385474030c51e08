// Catalogs: the list; one catalog's tree with lint findings on the nodes they concern, a leaf
// search, and a request tried against it (POST /v1/route, one routing call at a time).
import { api } from "./api.js";
import { clear, h, json } from "./dom.js";
import { routeCard } from "./route_card.js";

const MAX_TRY_STEPS = 16;

export async function catalogsPage(root, { onAuth }) {
  try {
    const { catalogs } = await api("/v1/catalogs");
    clear(root,
      h("div", { class: "toolbar" }, h("h2", {}, "Catalogs")),
      h("table", { class: "grid catalogs" },
        h("thead", {}, h("tr", {}, ["catalog", "id", "leaves", "routers", "depth", "largest menu", "compile"].map((c) => h("th", {}, c)))),
        h("tbody", {}, catalogs.length ? catalogs.map((c) => h("tr", { dataset: { catalogId: c.id } },
          h("td", {}, h("a", { href: `#/catalog/${encodeURIComponent(c.id)}` }, c.name)),
          h("td", {}, h("code", {}, c.id.slice(0, 12))),
          h("td", { class: "num" }, c.stats.num_leaves), h("td", { class: "num" }, c.stats.num_routers),
          h("td", { class: "num" }, c.stats.depth),
          h("td", { class: "num" }, `${c.stats.max_menu} (${c.stats.largest_menu_path || "<root>"})`),
          h("td", { class: "num" }, `${c.compile.compile_ms.toFixed(0)} ms`)))
          : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No catalogs loaded (stackroute serve --catalog FILE, or POST /v1/catalogs).")))));
  } catch (err) {
    onAuth(err);
  }
}

export async function catalogPage(root, catalogId, { onAuth }) {
  let info, tree;
  try {
    [info, tree] = await Promise.all([api(`/v1/catalogs/${encodeURIComponent(catalogId)}`),
      api(`/v1/catalogs/${encodeURIComponent(catalogId)}/tree`)]);
  } catch (err) {
    onAuth(err);
    return;
  }
  const findingsByPath = new Map();
  const treeBox = h("div", { class: "catalog-tree", id: "catalog-tree" });
  const findingsBox = h("div", { class: "findings", id: "findings" }, h("p", { class: "muted" }, "Checking the catalog…"));
  const search = h("input", { id: "leaf-search", type: "search", placeholder: "search leaves by name or description",
    oninput: () => renderTree() });
  const tryInput = h("input", { id: "try-query", type: "text", placeholder: "a request, e.g. send 5 euros to Asha" });
  const tryOut = h("div", { id: "try-steps", class: "try-steps" });
  const tryForm = h("form", { class: "try", onsubmit: (ev) => { ev.preventDefault(); tryRoute(); } },
    tryInput, h("button", { type: "submit", id: "try-submit" }, "Route"));

  clear(root,
    h("p", {}, h("a", { href: "#/catalogs" }, "← catalogs")),
    h("div", { class: "card" }, h("h2", {}, info.name, " ", h("code", { class: "muted" }, info.id.slice(0, 12))),
      h("p", { class: "muted" }, info.description),
      h("p", { class: "muted" }, `${info.stats.num_leaves} leaves · ${info.stats.num_routers} routers · depth ${info.stats.depth} · largest menu ${info.stats.max_menu}`)),
    h("div", { class: "columns" },
      h("section", { class: "card" }, h("h3", {}, "Tree"), search, treeBox),
      h("section", {},
        h("div", { class: "card" }, h("h3", {}, "Try a request"), tryForm, tryOut),
        h("div", { class: "card" }, h("h3", {}, "Lint findings"), findingsBox))));
  renderTree();
  loadLint();

  function matches(node, text) {
    return !text || node.name.toLowerCase().includes(text) || node.description.toLowerCase().includes(text) || node.path.toLowerCase().includes(text);
  }

  function renderTree(highlight = new Set()) {
    const text = search.value.trim().toLowerCase();
    const count = { leaves: 0 };
    const rendered = nodeBlock(tree, text, highlight, count);
    clear(treeBox, text ? h("p", { class: "muted", id: "search-count" }, `${count.leaves} matching leaves`) : null,
      rendered || h("p", { class: "muted" }, "No leaf matches."));
  }

  function nodeBlock(node, text, highlight, count) {
    const findings = findingsByPath.get(node.path) || [];
    const marks = findings.length ? h("span", { class: `finding-mark ${findings.some((f) => f.severity === "warning") ? "warning" : "info"}`,
      title: findings.map((f) => `${f.kind}: ${f.message}`).join("\n") }, `⚑ ${findings.length}`) : null;
    const label = [h("code", { class: highlight.has(node.path) ? "on-route" : "" }, node.name || "<root>"),
      node.sensitive ? h("span", { class: "tag warn" }, "sensitive") : null, marks,
      h("span", { class: "muted desc" }, node.description)];
    if (node.is_leaf) {
      if (!matches(node, text)) return null;
      count.leaves += 1;
      return h("div", { class: "leaf", dataset: { path: node.path } }, h("span", { class: "kind" }, "leaf"), label,
        h("details", { class: "schema" }, h("summary", {}, "parameters"), h("pre", {}, json(node.parameters))));
    }
    const children = node.children.map((c) => nodeBlock(c, text, highlight, count)).filter(Boolean);
    if (text && !children.length) return null;
    const isOpen = Boolean(text) || node.path === "" || highlight.has(node.path) || node.path.split("/").length < 2;
    return h("details", { class: "router", open: isOpen, dataset: { path: node.path } },
      h("summary", {}, h("span", { class: "kind" }, `router · ${node.children.length}`), label), children);
  }

  async function loadLint() {
    try {
      const lint = await api(`/v1/catalogs/${encodeURIComponent(catalogId)}/lint`);
      findingsByPath.clear();
      for (const w of lint.warnings) {
        for (const p of (w.paths && w.paths.length ? w.paths : [w.path])) {
          if (!findingsByPath.has(p)) findingsByPath.set(p, []);
          findingsByPath.get(p).push(w);
        }
      }
      clear(findingsBox,
        h("p", { class: "muted" }, `${lint.warnings.length} finding(s) in ${lint.seconds} s`,
          lint.embeddings_skipped ? ` (embedding checks skipped: ${lint.embeddings_skipped})` : ""),
        lint.warnings.length ? h("ul", { class: "finding-list" }, lint.warnings.map((w) => h("li", { class: `finding ${w.severity}` },
          h("span", { class: "tag" }, w.kind), " ",
          (w.paths && w.paths.length ? w.paths : [w.path]).map((p, i) => [i ? " ~ " : "", h("code", {}, p || "<root>")]),
          h("div", {}, w.message), w.suggestion ? h("div", { class: "muted" }, `fix: ${w.suggestion}`) : null)))
          : h("p", {}, "No findings."));
      renderTree();
    } catch (err) {
      onAuth(err);
      clear(findingsBox, h("p", { class: "error" }, String(err.message || err)));
    }
  }

  async function tryRoute() {
    const query = tryInput.value.trim();
    if (!query) return;
    clear(tryOut);
    const onRoute = new Set([""]);
    let body = { catalog: catalogId, query, include_state: true };
    try {
      for (let step = 0; step < MAX_TRY_STEPS; step += 1) {
        const r = await api("/v1/route", { method: "POST", body });
        const event = r.state && r.state.trace ? r.state.trace.filter((e) => e.kind === "route").pop() : null;
        const detail = { ...((event && event.detail) || {}), policy: r.routing.policy };
        tryOut.append(h("div", { class: "try-step" }, routeCard({ ...r, path: r.node, detail })));
        if (r.misstep) tryOut.append(h("p", { class: "error" }, `misstep: ${r.misstep}`));
        if (!["DONE", "BACK"].includes(r.decision)) onRoute.add(r.node ? `${r.node}/${r.decision}` : r.decision);
        renderTree(onRoute);
        if (r.is_leaf || !r.state || r.state.status !== "running") {
          tryOut.append(h("p", { class: "try-end" }, r.is_leaf ? `→ call ${r.node ? `${r.node}/` : ""}${r.decision}` : `run ${r.state ? r.state.status : "ended"}`));
          return;
        }
        body = { catalog: catalogId, state: r.state };
      }
      tryOut.append(h("p", { class: "muted" }, `stopped after ${MAX_TRY_STEPS} routing calls`));
    } catch (err) {
      onAuth(err);
      tryOut.append(h("p", { class: "error" }, String(err.message || err)));
    }
  }
}
