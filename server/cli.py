"""The `stackroute` command line (DESIGN.md, "What a user gets"): the commands of
`server/commands/` registered on one typer app. Each command imports what it needs when it
runs, so `lint --no-overlaps` and `trace` never load torch."""

from __future__ import annotations

import os

import typer
from stackroute.server.commands import calibrate, catalog, routing, service

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Hierarchical tool routing on a local model.")

app.command()(catalog.lint)
app.command("build-tree")(catalog.build_tree_cmd)
app.command()(catalog.trace)
app.command()(routing.route)
app.command()(routing.run)
app.command("eval")(routing.eval_)
app.command()(service.serve)
app.command()(calibrate.calibrate)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            add_help_option=False)(service.bench)


# OpenMP threads that spin while they wait for work collapse when the cores are shared: at
# load 3-5 on 2 cores a 200-token prefill took 5.7x longer with 2 spinning threads than with 1,
# while 2 threads that sleep instead took 0.47x as long as 1 spinning (bfloat16;
# bench/results/2026-12-03-cpu-threads-*). OpenMP reads this once, when torch loads, so it is
# set before any command imports torch; an operator's own value wins.
WAIT_POLICY = ("OMP_WAIT_POLICY", "PASSIVE")


def main() -> None:
    os.environ.setdefault(*WAIT_POLICY)
    app()


if __name__ == "__main__":
    main()
