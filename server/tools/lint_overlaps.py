"""`stackroute lint` with overlap checks: the runtime's validation and statistics, plus the
taxonomy findings of `server.taxonomy`, as one JSON-ready report and as readable text."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.errors import InputError, Problem
from stackroute.runtime.lint import lint_file
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.embeddings.vector_cache import CachedEmbedder
from stackroute.server.tools.taxonomy import (
    DEFAULT_THRESHOLDS,
    STRUCTURAL_KINDS,
    Finding,
    FindingKind,
    FindingSummary,
    OverlapThresholds,
    overlap_findings,
)


def lint_with_overlaps(path: str | Path, *, embedder: TextEmbedder | None = None,
                       use_embeddings: bool = True,
                       thresholds: OverlapThresholds = DEFAULT_THRESHOLDS) -> dict[str, Any]:
    """`lint --json` with overlap findings merged into "warnings" (each with kind, severity,
    paths, suggestion) and an "overlaps" summary. A catalog with errors is not checked further.

    `embedder` defaults to the packaged model behind the on-disk embedding cache; with
    `use_embeddings=False` (or no embedding package installed) only the checks that need no
    embeddings run, and nothing heavy (torch) is imported."""
    report = lint_file(path)
    out = report.to_dict()
    if not report.is_ok:
        out["overlaps"] = {"checked": False, "reason": "the catalog has errors"}
        return out
    started = time.perf_counter()
    tree = load_catalog(path)
    unavailable = None if use_embeddings else "not requested"
    if embedder is None and use_embeddings:
        try:
            embedder = CachedEmbedder.for_default_model()
        except InputError as e:  # the optional `embed` extra is not installed
            unavailable = str(e)
    findings = overlap_findings(tree, embedder if use_embeddings else None,
                                thresholds=thresholds)
    out["warnings"] = merge_warnings(report.warnings, findings)
    out["overlaps"] = {
        "checked": True,
        "num_findings": len(findings),
        "by_kind": FindingSummary.of(findings).by_kind,
        "thresholds": asdict(thresholds),
        "embedding_model": (getattr(embedder, "key", type(embedder).__name__)
                            if unavailable is None else None),
        "embeddings_skipped": unavailable,
        "seconds": round(time.perf_counter() - started, 2),
    }
    return out


def merge_warnings(runtime_warnings: Iterable[Problem],
                   findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """Findings first; then the runtime's structural warnings that no finding already covers
    (the structural findings repeat them with a kind and a fix), as kind "structure"."""
    covered = {p for f in findings if f.kind in STRUCTURAL_KINDS for p in f.paths}
    has_deep = any(f.kind is FindingKind.DEEP_TREE for f in findings)
    out = [f.to_dict() for f in findings]
    for p in runtime_warnings:
        if p.path in covered or (p.path == "" and has_deep):
            continue
        out.append({"kind": "structure", "severity": "warning", "path": p.path,
                    "paths": [p.path], "message": p.message, "suggestion": "", "score": None})
    return out


def render_warnings(warnings: Sequence[Mapping[str, Any]], *,
                    max_per_kind: int = 5) -> list[str]:
    """Plain lines: counts by kind, then the strongest few of each kind with their fix."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for w in warnings:
        by_kind.setdefault(str(w.get("kind", "structure")), []).append(w)
    lines = [f"{len(warnings)} finding(s):"]
    for kind, items in by_kind.items():
        num_warn = sum(1 for w in items if w.get("severity") == "warning")
        lines.append(f"  {kind:<20} {len(items):>5}  ({num_warn} warning, "
                     f"{len(items) - num_warn} info)")
    for kind, items in by_kind.items():
        shown = items[:max_per_kind]
        more = f", showing {len(shown)}" if len(items) > len(shown) else ""
        lines.append(f"\n{kind} ({len(items)}{more}):")
        for w in shown:
            paths = list(w.get("paths") or [w.get("path", "")])
            where = " ~ ".join(p or "<root>" for p in paths[:4])
            if len(paths) > 4:
                where += f" (+{len(paths) - 4} more)"
            lines.append(f"  [{w.get('severity', 'warning')}] {where}")
            lines.append(f"      {w.get('message', '')}")
            if w.get("suggestion"):
                lines.append(f"      fix: {w['suggestion']}")
    return lines
