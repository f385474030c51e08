"""The `stackroute` command line (DESIGN.md, "What a user gets"). Each command imports what it
needs when it runs, so `lint` and `trace` never load torch."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
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
        console.print(f"[red]error[/red] {p}")
    shown = report.warnings[:30]
    for p in shown:
        console.print(f"[yellow]warning[/yellow] {p}")
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
        err_console.print(f"[red]error[/red] {e}")
        raise typer.Exit(2) from e
    for line in format_tree(events):
        console.print(line, markup=False, highlight=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
