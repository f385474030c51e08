"""The `stackroute` command line (DESIGN.md, "What a user gets"). Each command imports what it
needs when it runs, so `lint --no-overlaps` and `trace` never load torch."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Hierarchical tool routing on a local model.")
console = Console()
err_console = Console(stderr=True)

EngineOpt = Annotated[str, typer.Option("--engine", help="transformers | vllm | remote")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="local model folder or GGUF file")]
BaseUrlOpt = Annotated[str | None, typer.Option("--base-url", help="remote engine base URL")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


OverlapsOpt = Annotated[bool, typer.Option(
    "--overlaps/--no-overlaps", help="overlap checks with the embedding model (sibling and "
    "subtree similarity, near-duplicate leaves, repeated names); --no-overlaps is the fast "
    "runtime lint, no torch")]


@app.command()
def lint(
    catalog: Path,
    overlaps: OverlapsOpt = True,
    queries: Annotated[Path | None, typer.Option(
        "--queries", help="JSONL sample queries with gold paths (FORMAT.md): route them and "
        "report which branches attract wrong choices")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="route at most N of the --queries")] = None,
    engine: EngineOpt = "transformers", model: ModelOpt = None, base_url: BaseUrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Validate a catalog, print its statistics and every problem; exit 1 on errors."""
    from stackroute.runtime.errors import StackrouteError

    if overlaps or queries is not None:
        _limit_threads()
    try:
        out = _lint_report(catalog, overlaps=overlaps)
        confusion = None
        if queries is not None and not out["errors"]:
            confusion = _query_confusion(catalog, queries, limit=limit,
                                         engine=_engine(engine, model, base_url))
    except StackrouteError as e:
        raise _fail(e) from e
    if confusion is not None:
        out["queries"] = confusion.to_dict()
    if as_json:
        _print_json(out)
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
    from stackroute.server.tools.lint_overlaps import lint_with_overlaps

    return lint_with_overlaps(catalog)


def _query_confusion(catalog: Path, queries: Path, *, limit: int | None, engine: Any) -> Any:
    from stackroute.server.tools.evaluate import read_queries
    from stackroute.server.tools.query_lint import query_confusion

    return query_confusion(_load_tree(catalog), engine, read_queries(queries, limit=limit),
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


def _limit_threads() -> None:
    """One torch thread on a machine of two cores or fewer: the embedding and routing calls
    are small, and a second thread there only contends with everything else on the box.
    OMP_NUM_THREADS covers a torch imported later; set_num_threads one already imported."""
    import os

    if (os.cpu_count() or 1) > 2:
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@app.command("build-tree")
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
    engine: EngineOpt = "transformers", model: ModelOpt = None, base_url: BaseUrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A tree from a flat catalog: leaves clustered by description into routers of
    min..max children, each router named from its members."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.tools.tree_builder import build_tree_file

    _limit_threads()
    try:
        namer = _engine(engine, model, base_url) if model_names else None
        result = build_tree_file(flat_catalog, out, engine=namer, min_children=min_children,
                                 max_children=max_children, seed=seed)
    except StackrouteError as e:
        raise _fail(e) from e
    if as_json:
        _print_json(result)
        return
    console.print(f"{result['out']}: {result['num_leaves']} leaves, {result['num_routers']} "
                  f"routers, depth {result['depth']}, max width {result['max_menu']} "
                  f"({result['seconds']:g} s)", markup=False, highlight=False, soft_wrap=True)


@app.command()
def trace(file: Path) -> None:
    """Print a recorded run (JSONL trace) as an indented tree."""
    from stackroute.runtime.trace import format_tree, read_jsonl

    try:
        events = read_jsonl(file)
    except (OSError, ValueError) as e:
        raise _fail(e) from e
    for line in format_tree(events):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


NoSpecOpt = Annotated[bool, typer.Option(
    "--no-speculation", help="route step by step even where a drafted path could be "
    "verified in one pass (same as --speculation off)")]
SpecOpt = Annotated[str, typer.Option(
    "--speculation", help="drafts to verify in one pass: routes (the route cache: requests "
    "seen before), evidence (leaf embeddings), both, off. Decisions never change; a wrong "
    "draft costs the longer pass (on CPU, about the extra tokens)")]


def _speculation(speculation: str, no_speculation: bool) -> Any:
    from stackroute.server.routing.options import DraftSource

    if no_speculation:
        return DraftSource.OFF
    try:
        return DraftSource(speculation)
    except ValueError as e:
        raise _fail(ValueError(
            f"--speculation must be one of {', '.join(s.value for s in DraftSource)}; "
            f"got {speculation!r}")) from e


def _router_options(speculation: str, no_speculation: bool) -> Any:
    from stackroute.server.routing.options import RouterOptions

    return RouterOptions(speculation=_speculation(speculation, no_speculation))


def _engine(engine: str, model: str | None, base_url: str | None) -> Any:
    from stackroute.server.engines.registry import create_engine

    return create_engine(engine, model=model, base_url=base_url)


def _load_tree(catalog: Path) -> Any:
    from stackroute.runtime.catalog import load_catalog

    return load_catalog(catalog)


def _fail(e: Exception) -> typer.Exit:
    err_console.print(f"[red]error[/red] {escape(str(e))}", highlight=False)
    return typer.Exit(2)


@app.command()
def route(
    catalog: Path, query: str,
    node: Annotated[str, typer.Option("--node", help="router path to decide at")] = "",
    engine: EngineOpt = "transformers", model: ModelOpt = None, base_url: BaseUrlOpt = None,
    no_speculation: NoSpecOpt = False, as_json: JsonOpt = False,
) -> None:
    """One routing decision at a node (the root by default). One decision is one call, so
    there is nothing to speculate: `--no-speculation` is accepted and changes nothing."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.routing.router import build_machine

    try:
        tree = _load_tree(catalog)
        machine = build_machine(tree, _engine(engine, model, base_url))
        state = machine.start(query, at=node)
        machine.step(state)
    except StackrouteError as e:
        raise _fail(e) from e
    event = next(e for e in reversed(state.trace) if e.kind.value == "route")
    out: dict[str, Any] = {
        "decision": event.decision, "node": node, "arguments": event.arguments,
        "probabilities": dict(event.probabilities or {}), "usage": dict(event.usage or {})}
    if as_json:
        _print_json(out)
        return
    console.print(f"[bold]{node or '<root>'}[/bold] -> [green]{out['decision']}[/green]")
    if out["arguments"] is not None:
        console.print(f"arguments: {json.dumps(out['arguments'], ensure_ascii=False)}")
    ranked = sorted(out["probabilities"].items(), key=lambda kv: -kv[1])[:8]
    for option, p in ranked:
        console.print(f"  {p:6.3f}  {option}", markup=False)
    console.print(f"usage: {out['usage']}", markup=False)


@app.command()
def run(
    catalog: Path, query: str,
    flat: Annotated[bool, typer.Option("--flat", help="the flat baseline: every leaf in one "
                                                      "menu")] = False,
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="approve every "
                                               "confirmation gate")] = False,
    trace_file: Annotated[Path | None, typer.Option("--trace", help="write the trace "
                                                    "(JSONL) here")] = None,
    engine: EngineOpt = "transformers", model: ModelOpt = None, base_url: BaseUrlOpt = None,
    speculation: SpecOpt = "routes", no_speculation: NoSpecOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a whole task through the stack machine."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.runtime.governance import RunStatus
    from stackroute.runtime.trace import format_tree, write_jsonl
    from stackroute.server.routing.router import build_machine

    try:
        options = _router_options(speculation, no_speculation)
        tree = _load_tree(catalog)
        machine = build_machine(tree, _engine(engine, model, base_url), is_flat=flat,
                                options=options)
        state = machine.start(query, is_flat=flat)
        machine.run(state)
        while state.status is RunStatus.PAUSED and auto_approve and state.pending is not None:
            machine.approve(state, state.pending.digest)
            machine.run(state)
    except StackrouteError as e:
        raise _fail(e) from e
    if trace_file is not None:
        with open(trace_file, "w", encoding="utf-8") as f:
            write_jsonl(state.trace, f)
    outcome = {"done": "done", "paused": "paused", "limit": "limit"}.get(state.status.value,
                                                                         "error")
    out = {"outcome": outcome,
           "calls": [{"path": c["path"], "arguments": c["arguments"]} for c in state.calls],
           "usage": state.usage.to_dict(), "format_failures": state.num_format_failures}
    if state.status is RunStatus.PAUSED and state.pending is not None:
        out["pending"] = state.pending.to_dict()
    if as_json:
        _print_json(out)
        return
    for line in format_tree(state.trace):
        console.print(line, markup=False, highlight=False)
    console.print(f"outcome: {outcome}; usage: {out['usage']}", markup=False)


@app.command("eval")
def eval_(
    catalog: Path, queries: Path,
    flat: Annotated[bool, typer.Option("--flat")] = False,
    limit: Annotated[int | None, typer.Option("--limit")] = None,
    engine: EngineOpt = "transformers", model: ModelOpt = None, base_url: BaseUrlOpt = None,
    speculation: SpecOpt = "routes", no_speculation: NoSpecOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Accuracy over a query file: success = the calls' paths equal the gold list. The route
    cache is shared by the whole file, so repeated requests are verified in one pass."""
    from rich.progress import Progress
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.routing.router import build_machine
    from stackroute.server.tools.evaluate import EvalSummary, evaluate, read_queries

    try:
        options = _router_options(speculation, no_speculation)
        tree = _load_tree(catalog)
        items = read_queries(queries, limit=limit)
        machine = build_machine(tree, _engine(engine, model, base_url), is_flat=flat,
                                options=options)
    except StackrouteError as e:
        raise _fail(e) from e
    summary = EvalSummary()
    with Progress(console=err_console, transient=True) as progress:
        task = progress.add_task("eval", total=len(items))
        for result in evaluate(machine, tree, items):
            summary.results.append(result)
            progress.advance(task)
    out = summary.to_dict()
    if as_json:
        _print_json(out)
        return
    table = Table("metric", "value")
    for k, v in out.items():
        table.add_row(k, json.dumps(v) if isinstance(v, dict) else f"{v:.4g}"
                      if isinstance(v, float) else str(v))
    console.print(table)


@app.command()
def serve(
    engine: Annotated[str | None, typer.Option(
        "--engine", help="transformers | vllm | remote [default: transformers]")] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    host: Annotated[str | None, typer.Option("--host", help="[default: 127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option("--port", help="[default: 8000]")] = None,
    catalog: Annotated[list[Path] | None, typer.Option(
        "--catalog", help="catalog file to load at start (repeatable)")] = None,
    db: Annotated[Path | None, typer.Option(
        "--db", help="SQLite file for sessions and catalogs [default: ./stackroute.db]")] = None,
    api_key: Annotated[str | None, typer.Option(
        "--api-key", help="require 'Authorization: Bearer KEY' (or STACKROUTE_API_KEY)")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="YAML or JSON settings file (or STACKROUTE_CONFIG)")] = None,
    allow_public_bind: Annotated[bool | None, typer.Option(
        "--allow-public-bind/--no-allow-public-bind",
        help="serve on a non-loopback host without an API key")] = None,
    log_level: Annotated[str | None, typer.Option(
        "--log-level", help="debug | info | warning | error")] = None,
) -> None:
    """Serve the HTTP API (routing, sessions, catalogs, OpenAI-compatible) with uvicorn.

    Flags override STACKROUTE_* environment variables, which override the config file."""
    import uvicorn
    from stackroute.server.http.app import create_app
    from stackroute.server.http.json_logging import configure_logging, logging_config
    from stackroute.server.settings import ServerSettings, SettingsError

    try:
        settings = ServerSettings.load(
            engine=engine, model=model, base_url=base_url, host=host, port=port,
            catalogs=catalog, db=db, api_key=api_key, config=config,
            allow_public_bind=allow_public_bind, log_level=log_level)
    except SettingsError as e:
        err_console.print(f"[red]error[/red] {escape(str(e))}", highlight=False)
        raise typer.Exit(2) from e
    level = settings.log_level.value
    configure_logging(level)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port,
                log_config=logging_config(level), log_level=level, access_log=False,
                server_header=False, proxy_headers=False, ws="none")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def bench(ctx: typer.Context) -> None:
    """The paper's benchmarks and ours (stackroute bench --help)."""
    from importlib.metadata import entry_points

    found = entry_points(group="stackroute.commands", name="bench")
    if not found:
        raise _fail(LookupError("the benchmarks are not installed: no 'bench' entry point in "
                                "the 'stackroute.commands' group (reinstall stackroute)"))
    next(iter(found)).load()(ctx.args)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
