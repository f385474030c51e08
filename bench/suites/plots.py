"""PNG plots from suite summaries (matplotlib, Agg backend; skipped with a warning if
matplotlib is not installed — it is in the `bench` and `dev` extras).

- tokens_vs_catalog_size.png: route input tokens per request, flat vs tree, log scales, with
  the paper's points and the model's context limit;
- success_vs_catalog_size.png: first-try success per suite and router;
- latency_cache.png: wall time per request with the prefix cache on/off, per layout.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stackroute.bench.suites.report import PAPER

log = logging.getLogger(__name__)

Summary = Mapping[str, Any]


def write_plots(summaries: Sequence[Summary], out_dir: Path) -> dict[str, Path]:
    """The plots the summaries have data for; name -> path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed (pip install 'stackroute[bench]'); no plots")
        return {}
    out_dir.mkdir(parents=True, exist_ok=True)
    by_suite = {s["suite"]: s for s in summaries}
    written: dict[str, Path] = {}
    for name, draw in (("tokens_vs_catalog_size", _tokens), ("success_vs_catalog_size", _success),
                       ("latency_cache", _latency_cache)):
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
        try:
            if draw(ax, by_suite):
                fig.tight_layout()
                path = out_dir / f"{name}.png"
                fig.savefig(path)
                written[name] = path
        finally:
            plt.close(fig)
    return written


def _rows(summary: Summary | None, variant: str) -> list[Mapping[str, Any]]:
    if summary is None:
        return []
    return sorted((r for r in summary["groups"] if r["variant"] == variant),
                  key=lambda r: r["num_leaves"])


def _tokens(ax: Any, by_suite: Mapping[str, Summary]) -> bool:
    summary = by_suite.get("scale-up")
    drawn = False
    for variant, marker in (("flat", "o"), ("hierarchical", "s")):
        rows = [r for r in _rows(summary, variant) if r.get("route_input_tokens_mean")]
        if rows:
            ax.plot([r["num_leaves"] for r in rows], [r["route_input_tokens_mean"] for r in rows],
                    marker=marker, label=f"{variant} (ours)")
            drawn = True
        paper = sorted((n, v["route_input_tokens_mean"]) for (s, n, r), v in PAPER.items()
                       if s == "scale-up" and r == variant and "route_input_tokens_mean" in v)
        if paper:
            ax.scatter([n for n, _ in paper], [t for _, t in paper], marker="x", s=60,
                       label=f"{variant} (paper)")
    if not drawn or summary is None:
        return False
    if summary.get("max_context_tokens"):
        ax.axhline(summary["max_context_tokens"], color="grey", linestyle="--", linewidth=1,
                   label=f"context of {summary.get('model')}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tools in the catalog")
    ax.set_ylabel("input tokens per routed request")
    ax.set_title("scale-up: input tokens of the route to one tool")
    ax.legend(fontsize=8)
    return True


def _success(ax: Any, by_suite: Mapping[str, Summary]) -> bool:
    drawn = False
    for suite in ("scale-up", "noisy-two-step", "semantic-overlap", "clean-semantic"):
        for variant, style in (("flat", "--"), ("hierarchical", "-")):
            rows = [r for r in _rows(by_suite.get(suite), variant) if r.get("success") is not None]
            if not rows:
                continue
            drawn = True
            line, = ax.plot([r["num_leaves"] for r in rows], [r["success"] for r in rows],
                            linestyle=style, marker="o", label=f"{suite} {variant}")
            answered = [r for r in rows if r.get("decision_accuracy") is not None]
            ax.plot([r["num_leaves"] for r in answered],
                    [r["decision_accuracy"] for r in answered], linestyle=":", marker=".",
                    color=line.get_color(), label=f"{suite} {variant}: answers right")
            paper = sorted((n, v["success"]) for (s, n, r), v in PAPER.items()
                           if s == suite and r == variant
                           and isinstance(v.get("success"), float | int))
            if paper:
                ax.scatter([n for n, _ in paper], [v for _, v in paper], marker="x", s=60,
                           color=line.get_color(), label=f"{suite} {variant} (paper)")
    if not drawn:
        return False
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("tools in the catalog")
    ax.set_ylabel("first-try success; share of answers right")
    ax.set_title("success vs catalog size (context exceeded scores 0)")
    ax.legend(fontsize=7)
    return True


def _latency_cache(ax: Any, by_suite: Mapping[str, Summary]) -> bool:
    summary = by_suite.get("cache")
    if summary is None:
        return False
    rows = [r for r in summary["groups"] if r.get("request_latency_ms_p50") is not None]
    if not rows:
        return False
    sizes = sorted({r["num_leaves"] for r in rows})
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    width = 0.8 / len(variants)
    for i, variant in enumerate(variants):
        got = {r["num_leaves"]: r for r in rows if r["variant"] == variant}
        xs = [k + i * width for k, n in enumerate(sizes) if n in got]
        p50 = [got[n]["request_latency_ms_p50"] for n in sizes if n in got]
        p95 = [got[n]["request_latency_ms_p95"] for n in sizes if n in got]
        ax.bar(xs, p50, width, label=variant,
               yerr=[[0] * len(p50), [b - a for a, b in zip(p50, p95, strict=True)]], capsize=3)
    ax.set_xticks([k + width * (len(variants) - 1) / 2 for k in range(len(sizes))],
                  [f"{n} tools" for n in sizes])
    ax.set_ylabel("wall time per request, ms (bar p50, whisker p95)")
    ax.set_title("hierarchical route latency: prefix cache on/off, layout")
    ax.legend(fontsize=8)
    return True
