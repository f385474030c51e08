"""One-question experiments: one module per `stackroute bench <name>` subcommand, each with
`main(argv: list[str] | None = None) -> int` and a `--smoke` mode."""
