"""Engine arguments passed through to vLLM: `--engine-arg KEY=VALUE` (repeated) on the command
line or an `engine_args` mapping in the settings, checked against vLLM's own `EngineArgs`
fields before the engine starts, so a typo is a clear error, not a silent default.

A value is read as JSON where it parses (`4`, `0.5`, `true`, `null`, `{"backend": "xgrammar"}`)
and as a string otherwise (`awq`, `bfloat16`). Keys may be spelt as vLLM's command line spells
them (`max-model-len`).

>>> parse_engine_args(["tensor_parallel_size=2", "max-model-len=8192", "quantization=awq"])
{'tensor_parallel_size': 2, 'max_model_len': 8192, 'quantization': 'awq'}
>>> try:
...     check_engine_args({"max_modle_len": 1}, known={"max_model_len", "dtype"})
... except EngineArgsError as e:
...     print(str(e).partition(";")[0])
unknown vLLM engine argument(s): max_modle_len (did you mean max_model_len?)
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from stackroute.runtime.errors import InputError

# Set by the engine itself from its own options: passing them here would be ambiguous.
RESERVED = {"model": "--model", "served_model_name": "--served-model-name",
            "enable_prefix_caching": "the engine's prefix-cache switch"}


class EngineArgsError(InputError):
    """Engine arguments that vLLM does not take, or that cannot be read."""

    code = "invalid_engine_args"


def parse_engine_args(items: Iterable[str]) -> dict[str, Any]:
    """`KEY=VALUE` strings as a mapping; a later key replaces an earlier one."""
    args: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise EngineArgsError(f"--engine-arg takes KEY=VALUE (such as "
                                  f"tensor_parallel_size=2), got {item!r}")
        try:
            args[key] = json.loads(raw)
        except ValueError:
            args[key] = raw
    return args


def normalise_engine_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Keys with dashes spelt with underscores (a settings file may use either)."""
    return {str(k).replace("-", "_"): v for k, v in args.items()}


def check_engine_args(args: Mapping[str, Any], *, known: Iterable[str]) -> dict[str, Any]:
    """`args` if every key is one of `known` and none is reserved; else an EngineArgsError
    listing every unknown key (with the closest known name)."""
    names = set(known)
    reserved = [f"{k} (use {RESERVED[k]})" for k in args if k in RESERVED]
    if reserved:
        raise EngineArgsError("engine argument(s) set by stackroute itself: "
                              + ", ".join(reserved))
    unknown = [k for k in args if k not in names]
    if unknown:
        described = []
        for key in unknown:
            close = difflib.get_close_matches(key, names, n=1)
            described.append(f"{key} (did you mean {close[0]}?)" if close else key)
        raise EngineArgsError(f"unknown vLLM engine argument(s): {', '.join(described)}; see "
                              "vLLM's EngineArgs")
    return dict(args)


def vllm_engine_arg_names() -> frozenset[str]:
    """The fields of vLLM's `AsyncEngineArgs` (imports vLLM)."""
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs

    return frozenset(f.name for f in dataclasses.fields(AsyncEngineArgs))
