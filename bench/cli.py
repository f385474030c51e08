"""`stackroute bench …`: a typer app to mount on the main CLI.

    stackroute bench SUITE [--smoke] [--out DIR] [--engine E] [--model M] [--seed S]
                           [--limit N] [--sizes 16,128] [--max-prompt-tokens T] [--data DIR]
                           [--threads N] [--report-only]
    stackroute bench all --smoke            # every suite, one report over all of them
    stackroute bench scale-up,cache …       # several suites on one engine load
    stackroute bench generate SUITE --leaves N --seed S --out DIR
    stackroute bench EXPERIMENT [--smoke] [--out DIR] …   # every experiment: bench/commands.py
    stackroute bench index                                  # bench/results/INDEX.md

Mount with `app.add_typer(bench_app, name="bench")` (server/cli.py). Nothing heavy is
imported until a command runs.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from stackroute.bench.commands import EXPERIMENTS

bench_app = typer.Typer(
    add_completion=False, no_args_is_help=True,
    help="The paper's benchmarks and ours: scale-up, noisy-two-step, semantic-overlap, "
         "clean-semantic, seal-tools, cache, constraint (or all). `stackroute bench SUITE …` "
         "is short for `stackroute bench run SUITE …`.")
console = Console()
err_console = Console(stderr=True)


@bench_app.command("generate")
def generate(
    suite: str,
    leaves: Annotated[int, typer.Option("--leaves", help="tools in the catalog")],
    out: Annotated[Path, typer.Option("--out", help="folder to write the files into")],
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Write a generated workload (catalog, flat twin, queries, metadata; shared/data format)."""
    from stackroute.bench.workloads.generate import generate_suite, write_suite

    try:
        paths = write_suite(generate_suite(suite, num_leaves=leaves, seed=seed), out)
    except ValueError as e:
        err_console.print(f"[red]error[/red] {escape(str(e))}")
        raise typer.Exit(2) from e
    for p in paths:
        console.print(str(p), markup=False, highlight=False)


_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True,
                 "help_option_names": []}


def mount(name: str, module: str, summary: str) -> None:
    """Register `stackroute bench NAME …` running `module:main(args)`, imported only when the
    command runs; its options pass through (`stackroute bench NAME --help` is the module's)."""

    def command(ctx: typer.Context) -> None:
        raise typer.Exit(run_experiment(module, ctx.args, name=name))

    command.__doc__ = summary
    bench_app.command(name, context_settings=_PASS_THROUGH)(command)


def run_experiment(module: str, args: list[str], *, name: str | None = None) -> int:
    """Import `module` and return `module.main(args)`; a module not there is a clear error
    (exit 2), not a traceback. A run with `--out DIR` leaves DIR/manifest.json
    (bench/run_manifest.py) unless the experiment wrote its own."""
    import importlib

    from stackroute.bench.run_manifest import RunRecorder

    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name):
            raise
        err_console.print(f"[red]error[/red] {escape(module)} is not there: this "
                          "experiment's module is missing from this installation")
        return 2
    from stackroute.bench.engines import EngineNotSupportedError

    recorder = RunRecorder.start(name or module, args)
    try:
        code = int(loaded.main(args) or 0)
    except EngineNotSupportedError as e:
        err_console.print(f"[red]error[/red] {escape(str(e))}")
        return 2
    if code == 0:
        recorder.finish(loaded)
    return code


for _experiment in EXPERIMENTS:
    mount(_experiment.name, _experiment.module,
          f"{_experiment.question} (options: stackroute bench {_experiment.name} --help)")


@bench_app.command("run")
def run(
    suite: Annotated[str, typer.Argument(help="a suite, several joined by commas, or all")],
    smoke: Annotated[bool, typer.Option("--smoke", help="the smallest size, 2 queries per "
                                        "row, long prompts skipped: a CI-sized run")] = False,
    out: Annotated[Path | None, typer.Option(
        "--out", help="output folder (default: bench/results/DATE-DEVICE-SUITE)")] = None,
    engine: Annotated[str, typer.Option("--engine", help="transformers | vllm")] = "transformers",
    model: Annotated[str | None, typer.Option("--model", help="model folder or GGUF file")] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    limit: Annotated[int | None, typer.Option("--limit", help="queries per row")] = None,
    sizes: Annotated[str | None, typer.Option(
        "--sizes", help="comma-separated catalog sizes instead of the suite's")] = None,
    max_prompt_tokens: Annotated[int | None, typer.Option(
        "--max-prompt-tokens", help="skip items with a longer prompt (default: 2500 with "
        "--smoke, none otherwise)")] = None,
    data: Annotated[Path | None, typer.Option("--data", help="shared/data folder holding "
                                              "seal-tools/")] = None,
    threads: Annotated[int | None, typer.Option(
        "--threads", help="CPU threads of the transformers engine (1 is steadier on a "
        "shared machine)")] = None,
    report_only: Annotated[bool, typer.Option(
        "--report-only", help="rebuild summary, report and plots from the recorded items; "
        "run nothing")] = False,
) -> None:
    """Run suites: items.jsonl, summary.json, report.md and plots/ in --out (resumable)."""
    bench_command(suite, smoke=smoke, out=out, engine=engine, model=model, seed=seed,
                  limit=limit, sizes=sizes, max_prompt_tokens=max_prompt_tokens, data=data,
                  threads=threads, report_only=report_only)


def bench_command(suite: str, *, smoke: bool = False, out: Path | None = None,
                  engine: str = "transformers", model: str | None = None, seed: int = 0,
                  limit: int | None = None, sizes: str | None = None,
                  max_prompt_tokens: int | None = None, data: Path | None = None,
                  threads: int | None = None, report_only: bool = False) -> None:
    """What `stackroute bench SUITE …` does; exits 2 on bad input, 1 if any item failed."""
    from stackroute.bench.suites.harness import BenchOptions, run_all, run_suite
    from stackroute.runtime.errors import StackrouteError

    try:
        size_list = tuple(int(s) for s in sizes.split(",")) if sizes else None
    except ValueError as e:
        err_console.print(f"[red]error[/red] --sizes expects numbers like 16,128, got {sizes!r}")
        raise typer.Exit(2) from e
    options = BenchOptions(engine=engine, model=model, is_smoke=smoke, out_dir=out, seed=seed,
                           limit=limit, sizes=size_list, max_prompt_tokens=max_prompt_tokens,
                           data_dir=data, num_threads=threads, is_report_only=report_only,
                           command=_command_line())
    names = None if suite == "all" else suite.split(",")
    try:
        runs = (run_all(options, suites=names, console=err_console)
                if names is None or len(names) > 1
                else [run_suite(suite, options, console=err_console)])
    except StackrouteError as e:
        err_console.print(f"[red]error[/red] {escape(str(e))}")
        raise typer.Exit(2) from e
    failed = 0
    for r in runs:
        failed += r.summary["num_errors"]
        console.print(f"[bold]{r.suite}[/bold]: {r.summary['num_items']} items "
                      f"({r.num_ran} run now, {r.summary['num_errors']} failed) -> "
                      f"{escape(str(r.paths.get('report', r.out_dir)))}")
    if (names is None or len(names) > 1) and runs:
        console.print(f"report: {escape(str(runs[0].out_dir.parent / 'report.md'))}")
    if failed:
        raise typer.Exit(1)


def _command_line() -> str:
    program = sys.argv[0]
    head = (["python", "-m", "stackroute.bench.cli"] if program.endswith("cli.py")
            else [Path(program).name])
    return shlex.join([*head, *sys.argv[1:]])


def main(argv: list[str] | None = None) -> None:
    """Entry point for `python -m stackroute.bench.cli SUITE …` (same options as
    `stackroute bench`): a first argument that is not `generate` is a suite to run."""
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {"generate", "run", "--help", "-h", *(e.name for e in EXPERIMENTS)}
    if args and args[0] not in commands:
        args.insert(0, "run")
    bench_app(args=args, prog_name="stackroute bench")


if __name__ == "__main__":
    main()
