"""Engines by name: the three built in (transformers, vllm, remote) and any engine named by an
import path `package.module:factory` (an operator's own adapter, or a deterministic test double
for harnesses). `create_engine` is the one way the CLI, the app and the benchmarks build one.

An import-path engine is named in the settings, as handler modules are; nothing is registered
anywhere (no global state): the factory is imported and called with the options a built-in
engine gets (`model`, and `base_url` when set).

>>> is_import_path("stackroute.bench.fixtures.scripted_engine:create")
True
>>> is_import_path("transformers")
False
>>> try:
...     create_engine("gpt")
... except UnknownEngineError as e:
...     print(str(e).partition(" (")[0])
unknown engine 'gpt'; known engines: remote, transformers, vllm
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.server.engines.base import Engine

IMPORT_PATH_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


class UnknownEngineError(InputError):
    """An engine name that is neither built in nor an importable 'module:factory'."""

    code = "unknown_engine"


class EngineImportError(UnknownEngineError):
    """An engine import path that does not name an importable callable."""


def _transformers(**options: Any) -> Engine:
    from stackroute.server.engines.transformers_engine import TransformersEngine

    return TransformersEngine(**options)


def _vllm(**options: Any) -> Engine:
    from stackroute.server.engines.vllm_engine import VllmEngine

    return VllmEngine(**options)


def _remote(**options: Any) -> Engine:
    """The CLI and the service probe what the upstream offers unless told (`constraints`)."""
    from stackroute.server.engines.remote_engine import RemoteEngine

    options.setdefault("constraints", "auto")
    return RemoteEngine(**options)


BUILT_IN: dict[str, Callable[..., Engine]] = {
    "transformers": _transformers, "vllm": _vllm, "remote": _remote}


def is_import_path(name: str) -> bool:
    return IMPORT_PATH_PATTERN.fullmatch(name) is not None


def check_engine_name(name: str) -> str:
    """`name` if it names an engine (built in, or an importable factory); else an
    `UnknownEngineError` listing the known ones. Builds nothing."""
    if name in BUILT_IN:
        return name
    if is_import_path(name):
        import_engine_factory(name)
        return name
    raise UnknownEngineError(f"unknown engine {name!r}; known engines: "
                             f"{', '.join(sorted(BUILT_IN))} (or an import path "
                             "'module:factory')")


def create_engine(name: str, *, model: str | None = None, base_url: str | None = None,
                  **options: Any) -> Engine:
    """The engine `name` names, built with `model` (None: the engine's default) and, for a
    remote engine, `base_url`."""
    check_engine_name(name)
    kwargs: dict[str, Any] = {"model": model, **options}
    if base_url is not None:
        kwargs["base_url"] = base_url
    factory = BUILT_IN.get(name) or import_engine_factory(name)
    engine: Engine = factory(**kwargs)
    return engine


def engine_options(engine: str, *, chat_template: str | Path | None = None,
                   engine_args: Mapping[str, Any] | None = None,
                   served_model_name: str | None = None,
                   remote_constraints: str = "auto") -> dict[str, Any]:
    """The options `create_engine` gets for `engine` from the engine settings the CLI and the
    service share; one set for an engine that cannot use it is an `InputError` naming it.

    >>> engine_options("vllm", engine_args={"tensor_parallel_size": 2}, served_model_name="m")
    {'engine_args': {'tensor_parallel_size': 2}, 'served_model_name': 'm'}
    >>> engine_options("remote")
    {'constraints': 'auto'}
    """
    from stackroute.server.engines.remote_features import parse_constraint_api

    options: dict[str, Any] = {}
    wrong: list[str] = []  # "FLAG: who it is for"
    if chat_template is not None:
        if engine in ("transformers", "vllm"):
            options["chat_template"] = chat_template
        else:
            wrong.append("--chat-template is for the transformers and vllm engines (a remote "
                         "upstream renders its own prompts)")
    vllm_only: tuple[tuple[str, str, Any], ...] = (
        ("--engine-arg", "engine_args", dict(engine_args) if engine_args else None),
        ("--served-model-name", "served_model_name", served_model_name))
    for flag, key, value in vllm_only:
        if value is None:
            continue
        if engine == "vllm":
            options[key] = value
        else:
            wrong.append(f"{flag} is for the vllm engine")
    try:
        parse_constraint_api(remote_constraints)
    except ValueError as error:
        raise InputError(str(error)) from None
    if engine == "remote":
        options["constraints"] = remote_constraints
    elif remote_constraints != "auto":
        wrong.append("--remote-constraints is for the remote engine")
    if wrong:
        raise InputError(f"{'; '.join(wrong)}; got --engine {engine}")
    return options


def import_engine_factory(ref: str) -> Callable[..., Any]:
    """The callable that `ref` ("module:attribute") names; EngineImportError says why not."""
    if not is_import_path(ref):
        raise EngineImportError(f"engine {ref!r} is not an import path 'module:factory'")
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise EngineImportError(f"engine {ref!r}: cannot import module {module_name!r} "
                                f"({e})") from e
    factory = getattr(module, attr, None)
    if factory is None or not callable(factory):
        raise EngineImportError(f"engine {ref!r}: module {module_name!r} has no callable "
                                f"{attr!r}")
    return factory  # type: ignore[no-any-return]
