"""The `stackroute` command line (DESIGN.md, "What a user gets"): the commands of
`server/commands/` registered on one typer app. Each command imports what it needs when it
runs, so `lint --no-overlaps` and `trace` never load torch."""

from __future__ import annotations

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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
