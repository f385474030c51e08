"""The `stackroute` command line (DESIGN.md, "What a user gets"). Each command imports what it
needs when it runs, so `lint` and `trace` never load torch."""

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


@app.command()
def lint(
    catalog: Path,
    queries: Annotated[Path | None, typer.Option("--queries")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Validate a catalog, print its statistics and every problem; exit 1 on errors."""
    from stackroute.runtime.lint import lint_file

    report = lint_file(catalog)
    if queries is not None:
        err_console.print("[yellow]--queries (routing sample queries) is not built yet; "
                          "ignored[/yellow]")
    if as_json:
        _print_json(report.to_dict())
    else:
        _print_lint(report)
    raise typer.Exit(0 if report.is_ok else 1)


def _print_lint(report: Any) -> None:
    s = report.stats
    if s is not None:
        console.print(f"[bold]{report.source}[/bold]: {s.num_leaves} leaves, {s.num_routers} "
                      f"routers, depth {s.depth}, largest menu {s.max_menu} "
                      f"({s.largest_menu_path or '<root>'})")
        table = Table("level", "routers", "min", "median", "mean", "max")
        for b in s.branching_by_level:
            table.add_row(*(f"{b[k]:g}" for k in ("level", "routers", "min", "median", "mean",
                                                  "max")))
        console.print(table)
    for p in report.errors:
        console.print(f"[red]error[/red] {escape(str(p))}")
    shown = report.warnings[:30]
    for p in shown:
        console.print(f"[yellow]warning[/yellow] {escape(str(p))}")
    if len(report.warnings) > len(shown):
        console.print(f"[yellow]… and {len(report.warnings) - len(shown)} more warnings "
                      "(--json lists all)[/yellow]")
    verdict = "[green]ok[/green]" if report.is_ok else f"[red]{len(report.errors)} error(s)[/red]"
    console.print(f"{verdict}, {len(report.warnings)} warning(s)")


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
    "--no-speculation", help="route step by step (the only mode until speculative routing "
    "lands; accepted so scripts need not change)")]


def _engine(engine: str, model: str | None, base_url: str | None) -> Any:
    from stackroute.server.engines.base import ENGINES

    options: dict[str, Any] = {"model": model}
    if base_url is not None:
        options["base_url"] = base_url
    return ENGINES.create(engine, **options)


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
    """One routing decision at a node (the root by default)."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.routing import build_machine

    try:
        tree = _load_tree(catalog)
        machine = build_machine(tree, _engine(engine, model, base_url))
        state = machine.start(query, at=node)
        machine.step(state)
    except StackrouteError as e:
        raise _fail(e) from e
    event = next(e for e in reversed(state.trace) if e.kind.value == "route")
    out = {"decision": event.decision, "node": node, "arguments": event.arguments,
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
    no_speculation: NoSpecOpt = False, as_json: JsonOpt = False,
) -> None:
    """Run a whole task through the stack machine."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.runtime.governance import RunStatus
    from stackroute.runtime.trace import format_tree, write_jsonl
    from stackroute.server.routing import build_machine

    try:
        tree = _load_tree(catalog)
        machine = build_machine(tree, _engine(engine, model, base_url), is_flat=flat)
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
    no_speculation: NoSpecOpt = False, as_json: JsonOpt = False,
) -> None:
    """Accuracy over a query file: success = the calls' paths equal the gold list."""
    from rich.progress import Progress
    from stackroute.bench.evaluate import EvalSummary, evaluate, read_queries
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.routing import build_machine

    try:
        tree = _load_tree(catalog)
        items = read_queries(queries, limit=limit)
        machine = build_machine(tree, _engine(engine, model, base_url), is_flat=flat)
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
    from stackroute.server.app import create_app
    from stackroute.server.json_logging import configure_logging, logging_config
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
    from stackroute.bench.cli import main as bench_main

    bench_main(ctx.args)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
