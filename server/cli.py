"""The `stackroute` command line (DESIGN.md, "What a user gets"): the commands of
`server/commands/` registered on one typer app. Each command imports what it needs when it
runs, so `lint --no-overlaps` and `trace` never load torch."""

from __future__ import annotations

import typer
from stackroute.server.commands import calibrate, catalog, routing, service
from stackroute.server.commands import mcp as mcp_commands
from stackroute.server.commands.common import limit_threads

# help text is plain text: "[default: 8000]" and "stackroute[qwen]" are shown, not read as
# rich markup (typer's default, which swallows them)
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Hierarchical tool routing on a local model.")

app.command()(catalog.lint)
app.command("build-tree")(catalog.build_tree_cmd)
app.command()(catalog.trace)
app.command()(routing.route)
app.command()(routing.run)
app.command("eval")(routing.eval_)
app.command()(service.serve)
app.command()(calibrate.calibrate)
app.command("mcp")(mcp_commands.mcp)
# `stackroute catalog …`: commands that make catalogs from elsewhere
catalog_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                          help="Make catalogs from other tool sources.")
catalog_app.command("import-mcp")(mcp_commands.import_mcp)
app.add_typer(catalog_app, name="catalog")
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            add_help_option=False)(service.bench)


def configure_process() -> None:
    """What `stackroute` sets before any command loads torch: one torch thread on a machine
    of two cores or fewer (`limit_threads`). Measured on the 2-core VM (bfloat16, a 200-token
    prefill): 1 thread 162 ms quiet and 164 ms with the other core busy; 2 threads 103 ms
    quiet but 2,522 ms with the other core busy (OpenMP's waiting threads spin against the
    other job), and 172-244 ms with passive waits in either case
    (bench/results/2026-12-03-cpu-threads-*). OMP_NUM_THREADS set by the operator wins (2 on
    a dedicated machine is 1.6x faster when nothing else runs)."""
    limit_threads()


def main() -> None:
    configure_process()
    app()


if __name__ == "__main__":
    main()
