"""Engines named by import path (`package.module:factory`), for engines that live outside this
package: an operator's own adapter, or a deterministic test double for harnesses.

The operator names it in the settings, as they name handler modules; nothing is registered
anywhere (no global state): `build_engine` imports the factory and calls it with the same
options a built-in engine gets (`model`, and `base_url` when set).

>>> is_import_path("stackroute.bench.scripted_engine:create")
True
>>> is_import_path("transformers")
False
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

IMPORT_PATH_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


class EngineImportError(ValueError):
    """An engine import path that does not name an importable callable."""


def is_import_path(name: str) -> bool:
    return IMPORT_PATH_PATTERN.fullmatch(name) is not None


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
