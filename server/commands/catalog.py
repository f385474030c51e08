"""Commands over catalog files: `lint`, `build-tree` and `trace` (a recorded run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from stackroute.server.commands.common import (
    JsonOpt,
    console,
    fail,
    load_tree,
    print_json,
)
from stackroute.server.commands.option_groups import EngineChoice, with_option_groups

OverlapsOpt = Annotated[bool, typer.Option(
    "--overlaps/--no-overlaps", help="overlap checks with the embedding model (sibling and "
    "subtree similarity, near-duplicate leaves, repeated names); --no-overlaps is the fast "
    "runtime lint, no torch")]


@with_option_groups
def lint(
    catalog: Path,
    overlaps: OverlapsOpt = True,
    queries: Annotated[Path | None, typer.Option(
        "--queries", help="JSONL sample queries with gold paths (FORMAT.md): route them and "
        "report which branches attract wrong choices")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="route at most N of the --queries")] = None,
    *, engine: EngineChoice, as_json: JsonOpt = False,
) -> None:
    """Validate a catalog, print its statistics and every problem; exit 1 on errors."""
    from stackroute.runtime.errors import StackrouteError

    try:
        out = _lint_report(catalog, overlaps=overlaps)
        confusion = None
        if queries is not None and not out["errors"]:
            confusion = _query_confusion(catalog, queries, limit=limit,
                                         engine=engine.make())
    except StackrouteError as e:
        raise fail(e) from e
    if confusion is not None:
        out["queries"] = confusion.to_dict()
    if as_json:
        print_json(out)
    else:
        _print_lint(out)
        if confusion is not None:
            console.print(f"\n[bold]--queries {escape(str(queries))}[/bold]")
            console.print(confusion.render_text(), markup=False, highlight=False,
                          soft_wrap=True)
    raise typer.Exit(1 if out["errors"] else 0)


def _lint_report(catalog: Path, *, overlaps: bool) -> dict[str, Any]:
    """`lint --json`'s object: the runtime's lint, plus the overlap findings when asked."""
    if not overlaps:
        from stackroute.runtime.lint import lint_file

        return lint_file(catalog).to_dict()
    from stackroute.runtime.errors import InputError
    from stackroute.server.commands.progress import cached_embedder_with_progress, progress_bar
    from stackroute.server.tools.lint_overlaps import lint_with_overlaps

    with progress_bar("lint: embedding nodes") as bar:
        try:
            embedder = cached_embedder_with_progress(bar)
        except InputError:  # no embedding model: lint_with_overlaps reports the skip
            return lint_with_overlaps(catalog)
        return lint_with_overlaps(catalog, embedder=embedder)


def _query_confusion(catalog: Path, queries: Path, *, limit: int | None, engine: Any) -> Any:
    from stackroute.server.tools.evaluate import read_queries
    from stackroute.server.tools.query_lint import query_confusion

    return query_confusion(load_tree(catalog), engine, read_queries(queries, limit=limit),
                           limit=limit)


def _print_lint(out: dict[str, Any]) -> None:
    s = out.get("stats")
    if s is not None:
        console.print(f"[bold]{escape(out['source'])}[/bold]: {s['num_leaves']} leaves, "
                      f"{s['num_routers']} routers, depth {s['depth']}, largest menu "
                      f"{s['max_menu']} ({escape(s['largest_menu_path'] or '<root>')})")
        table = Table("level", "routers", "min", "median", "mean", "max")
        for b in s["branching_by_level"]:
            table.add_row(*(f"{b[k]:g}" for k in ("level", "routers", "min", "median", "mean",
                                                  "max")))
        console.print(table)
    for p in out["errors"]:
        console.print(f"[red]error[/red] {escape(_where(p))}")
    warnings = out["warnings"]
    overlaps = out.get("overlaps")
    if overlaps is not None and overlaps.get("checked"):
        from stackroute.server.tools.lint_overlaps import render_warnings

        for line in render_warnings(warnings):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        skipped = overlaps.get("embeddings_skipped")
        console.print(f"overlap checks: {overlaps['num_findings']} finding(s) in "
                      f"{overlaps['seconds']:g} s"
                      + (f" (embedding checks skipped: {skipped})" if skipped else "")
                      + "; --json lists all", markup=False, highlight=False)
    else:
        shown = warnings[:30]
        for p in shown:
            console.print(f"[yellow]warning[/yellow] {escape(_where(p))}")
        if len(warnings) > len(shown):
            console.print(f"[yellow]… and {len(warnings) - len(shown)} more warnings "
                          "(--json lists all)[/yellow]")
    errors = out["errors"]
    verdict = "[green]ok[/green]" if not errors else f"[red]{len(errors)} error(s)[/red]"
    console.print(f"{verdict}, {len(warnings)} warning(s)")


def _where(problem: dict[str, Any]) -> str:
    return f"{problem['path'] or '<root>'}: {problem['message']}"


@with_option_groups
def build_tree_cmd(
    flat_catalog: Path,
    out: Annotated[Path, typer.Option("-o", "--out", help="where to write the built catalog "
                                                          "(JSON)")],
    min_children: Annotated[int, typer.Option("--min-children", help="fewest children per "
                                              "router")] = 6,
    max_children: Annotated[int, typer.Option("--max-children", help="most children per "
                                              "router")] = 12,
    seed: Annotated[int, typer.Option("--seed", help="k-means seed")] = 0,
    model_names: Annotated[bool, typer.Option(
        "--model-names/--word-names", help="name routers with the model (constrained to a "
        "short name pattern) or from their members' words (fast, no model)")] = False,
    *, engine: EngineChoice, as_json: JsonOpt = False,
) -> None:
    """A tree from a flat catalog: leaves clustered by description into routers of
    min..max children, each router named from its members."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.commands.progress import cached_embedder_with_progress, progress_bar
    from stackroute.server.tools.tree_builder import build_tree_file

    try:
        namer = engine.make() if model_names else None
        with progress_bar("build-tree: embedding leaves") as bar:
            result = build_tree_file(flat_catalog, out, embedder=cached_embedder_with_progress(
                bar), engine=namer, min_children=min_children, max_children=max_children,
                seed=seed)
    except StackrouteError as e:
        raise fail(e) from e
    if as_json:
        print_json(result)
        return
    console.print(f"{result['out']}: {result['num_leaves']} leaves, {result['num_routers']} "
                  f"routers, depth {result['depth']}, max width {result['max_menu']} "
                  f"({result['seconds']:g} s)", markup=False, highlight=False, soft_wrap=True)


def trace(file: Path) -> None:
    """Print a recorded run (JSONL trace) as an indented tree."""
    from stackroute.runtime.trace import format_tree, read_jsonl

    try:
        events = read_jsonl(file)
    except (OSError, ValueError) as e:
        raise fail(e) from e
    for line in format_tree(events):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
