"""`stackroute calibrate`: a calibration file for the guided policy, measured for the engine's
model on the operator's own dev queries (server/tools/calibrate.py does the measuring)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from stackroute.runtime.errors import InputError
from stackroute.server.commands.common import (
    JsonOpt,
    console,
    fail,
    load_tree,
    print_json,
)
from stackroute.server.commands.option_groups import EngineChoice, with_option_groups
from stackroute.server.routing.options import ABSTENTION_MAX_CALL_LOSS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from stackroute.runtime.tree import CapabilityTree
    from stackroute.server.embeddings.leaf_index import EvidenceSource
    from stackroute.server.engines.base import Engine
    from stackroute.server.tools.evaluate import Query

QueriesOpt = Annotated[Path, typer.Option(
    "--queries", help="dev queries, one JSON object a line (FORMAT.md): each with the gold "
    "leaf paths a correct run calls, [] when nothing in the catalog applies. Dev splits "
    "only: report on test splits")]
CatalogOpt = Annotated[Path | None, typer.Option(
    "--catalog", help="the catalog whose leaf paths the queries' gold lists name (required)")]
OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="where to write the calibration (default: ./<model>.calibration.json, in "
    "the current directory)")]
LimitOpt = Annotated[int | None, typer.Option("--limit", help="the first N queries only")]
AbstentionOpt = Annotated[bool, typer.Option(
    "--abstention", help="also fit the abstention check (`--abstain`) on the queries: it "
    "needs some that no leaf serves (gold []); written into the calibration, off until "
    "--abstain or the `abstain` setting turns it on")]
MaxCallLossOpt = Annotated[float, typer.Option(
    "--max-call-loss", help="--abstention: the share of in-scope successes the check may "
    "stop on the queries", min=0.0, max=1.0)]
ThresholdsOnlyOpt = Annotated[bool, typer.Option(
    "--thresholds-only", help="recompute only the model-free thresholds (no model calls), "
    "keeping the weights of --out where it exists, else of the model's shipped calibration")]


@with_option_groups
def calibrate(
    queries: QueriesOpt, catalog: CatalogOpt = None,
    out: OutOpt = None, limit: LimitOpt = None, thresholds_only: ThresholdsOnlyOpt = False,
    abstention: AbstentionOpt = False, max_call_loss: MaxCallLossOpt = ABSTENTION_MAX_CALL_LOSS,
    *, engine: EngineChoice, as_json: JsonOpt = False,
) -> None:
    """Measure the guided policy's weights and thresholds for a model on dev queries, and
    write them as a calibration file for `--calibration` (or STACKROUTE_CALIBRATION)."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.runtime.prompt import PromptStyle
    from stackroute.server.commands.progress import progress_bar
    from stackroute.server.routing.calibration import find_calibration, require_embedder
    from stackroute.server.routing.calibration_file import CalibrationFile
    from stackroute.server.routing.router import evidence_for_tree
    from stackroute.server.tools.calibrate import calibrate as measure
    from stackroute.server.tools.calibrate import calibrate_thresholds
    from stackroute.server.tools.calibration_records import Dataset, check_gold_paths
    from stackroute.server.tools.evaluate import read_queries

    try:
        catalog = _check_inputs(queries, catalog, limit)
        tree = load_tree(catalog)
        items = read_queries(queries, limit=limit)
        if not items:
            raise InputError(f"{queries}: no queries; calibration needs dev queries with gold "
                             "paths (FORMAT.md)")
        check_gold_paths(tree, items, source=str(queries))
        if abstention:
            from stackroute.server.tools.abstention_calibration import require_out_of_scope

            require_out_of_scope(items)
        require_embedder()
        made = engine.make()
        name = made.info.model
        path = out or default_out(name)
        if path.is_file():  # its other sections are kept: readable now, not after the run
            CalibrationFile.read(path)
        dev = Dataset(catalog.name.split(".")[0] or "dev", tree, items, PromptStyle())
        evidence = {dev.name: evidence_for_tree(tree)}
        if thresholds_only:
            keep = out if out is not None and out.is_file() else find_calibration(name)
            result = calibrate_thresholds(name, evidence, [dev], keep=keep)
        else:
            with progress_bar("calibrate", total=len(items)) as bar:
                result = measure(made, evidence, [dev], on_query=bar.advance)
        result.measured["source"] = {"catalog": str(catalog), "queries": str(queries),
                                     "limit": limit}
        result.write(path)
        check = _fit_abstention(None if thresholds_only else made, evidence[dev.name], tree,
                                items, max_call_loss, path) if abstention else None
    except StackrouteError as e:
        raise fail(e) from e
    summary: dict[str, Any] = {
        "file": str(path), "model": name, "options": result.options.to_dict(),
        **{k: result.measured[k] for k in ("dev", "model_alone", "model_calibrated",
                                           "evidence_alone", "chosen", "thresholds")
           if k in result.measured}}
    if check is not None:
        summary["abstention"] = check
    if as_json:
        print_json(summary)
        return
    _print_summary(summary, thresholds_only=thresholds_only)


def _fit_abstention(engine: Engine | None, evidence: EvidenceSource, tree: CapabilityTree,
                    items: Sequence[Query], max_call_loss: float, path: Path) -> dict[str, Any]:
    """Fit the abstention check on the dev queries and write it into `path`'s calibration."""
    from stackroute.server.commands.progress import progress_bar
    from stackroute.server.routing.abstention import write_abstention
    from stackroute.server.tools.abstention_calibration import calibrate_abstention

    with progress_bar("abstention", total=len(items)) as bar:
        fitted = calibrate_abstention(engine, evidence, tree, items,
                                      max_call_loss=max_call_loss, on_query=bar.advance)
    write_abstention(path, fitted.fitted.options, fitted.measured())
    return {"options": fitted.fitted.options.to_dict(), **fitted.measured()}


def default_out(model: str) -> Path:
    """`./<model>.calibration.json` in the current directory, never the installed package.

    >>> default_out("org/Model 7B").as_posix()
    'org_Model_7B.calibration.json'
    """
    from stackroute.server.routing.calibration import calibration_file

    stem = calibration_file(model, Path(".")).name.removesuffix(".json")
    return Path(f"{stem}.calibration.json")


def _check_inputs(queries: Path, catalog: Path | None, limit: int | None) -> Path:
    if catalog is None:
        raise InputError("a catalog is required: --catalog FILE, the catalog whose leaf paths "
                         "the queries' gold lists name")
    for flag, path in (("--queries", queries), ("--catalog", catalog)):
        if not path.is_file():
            raise InputError(f"{flag}: file {path} does not exist")
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    return catalog


def _print_summary(summary: dict[str, Any], *, thresholds_only: bool) -> None:
    options = summary["options"]
    if not thresholds_only:
        table = Table("dev set", "model alone", "model + contrast", "guided (chosen)",
                      "evidence alone", title="path accuracy on the dev queries")
        chosen = summary["chosen"]["by_dataset"]
        for name in chosen:
            table.add_row(escape(name), *(f"{summary[k][name]['path_accuracy']:.3f}" for k in
                                          ("model_alone", "model_calibrated")),
                          f"{chosen[name]['path_accuracy']:.3f}",
                          f"{summary['evidence_alone'][name]['path_accuracy']:.3f}")
        console.print(table)
    settings = Table("setting", "value", title="calibration")
    keys = ("evidence_weight", "evidence_aggregate", "evidence_temperature",
            "is_contrast_enabled", "contrast_strength", "out_of_scope_score",
            "fallback_min_score", "backtrack_gap", "done_gap", "finish_part_score")
    for key in keys:
        settings.add_row(key, str(options[key]))
    console.print(settings)
    check = summary.get("abstention")
    if check is not None:
        console.print(
            f"abstention check: {', '.join(check['features'])}; on the dev queries it stops "
            f"{check['dev_out_of_scope_stopped']:.2f} of {check['num_abstain']} out of scope and "
            f"{check['dev_successes_stopped']} of {check['num_call']} right first leaves "
            "(off until --abstain)", highlight=False)
    file = escape(summary["file"])
    console.print(f"wrote [bold]{file}[/bold]; route with it: "
                  f"stackroute run CATALOG QUERY --calibration {file} "
                  f"(also route, eval, serve; or STACKROUTE_CALIBRATION={file})",
                  highlight=False)
