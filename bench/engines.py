"""How every benchmark builds its engine: `--engine`/`--model`/`--base-url` parsed the same
way, and the engine built through `stackroute.server.engines.registry.create_engine`, so an
experiment runs on `transformers`, `vllm`, `remote` or an import-path engine wherever it can.

An experiment that needs the transformers engine's internals (its loaded weights shared by
several engines, its prefix cache switched off, its dtype, its draft settings) says so with
`needs_transformers`: another engine is then a clear error, not a traceback.
"""

from __future__ import annotations

import argparse
from typing import Any

TRANSFORMERS = "transformers"


class EngineNotSupportedError(ValueError):
    """An experiment asked for an engine it cannot measure."""


def add_engine_options(parser: argparse.ArgumentParser, *,
                       transformers_only: str | None = None) -> None:
    """`--engine`, `--model`, `--base-url`. `transformers_only`: why this experiment needs
    the transformers engine (shown in --help)."""
    note = (f" (this experiment needs the transformers engine: {transformers_only})"
            if transformers_only else "")
    parser.add_argument("--engine", default=TRANSFORMERS,
                        help="transformers | vllm | remote | package.module:factory" + note)
    parser.add_argument("--model", default=None,
                        help="model folder (default: the engine's own default model)")
    parser.add_argument("--base-url", default=None, help="upstream URL (remote engine)")


def needs_transformers(engine: str, experiment: str, why: str) -> None:
    """Raise `EngineNotSupportedError` unless `engine` is the transformers engine."""
    if engine != TRANSFORMERS:
        raise EngineNotSupportedError(
            f"{experiment} needs the transformers engine ({why}); got --engine {engine!r}")


def build_engine(engine: str, model: str | None = None, *, base_url: str | None = None,
                 **transformers_options: Any) -> Any:
    """`create_engine(engine, …)`; `transformers_options` (dtype, threads, cache size…) go
    to the transformers engine only: other engines take their settings from their own
    configuration."""
    from stackroute.server.engines.registry import create_engine

    options: dict[str, Any] = {k: v for k, v in transformers_options.items() if v is not None}
    if engine != TRANSFORMERS:
        options = {}
    if base_url is not None:
        options["base_url"] = base_url
    return create_engine(engine, model=model, **options)


def engine_from_args(args: argparse.Namespace, **transformers_options: Any) -> Any:
    """`build_engine` from the options `add_engine_options` added."""
    return build_engine(args.engine, args.model, base_url=getattr(args, "base_url", None),
                        **transformers_options)
