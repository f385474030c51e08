"""The grammar modules as modules: light imports, and docstring examples that run."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys

import pytest

MODULES = ["bounded", "cache", "container_caps", "decode", "jump_forward", "menu", "number_caps",
           "regex_bounds", "schema", "schema_walk", "string_caps", "tokenizer", "trie"]


def test_grammar_modules_import_without_torch() -> None:
    # A fresh interpreter: this test session has long imported torch through xgrammar.
    imports = "\n".join(f"import stackroute.grammars.{name}" for name in MODULES)
    code = (
        f"import sys\n{imports}\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'xgrammar' not in sys.modules, 'xgrammar imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(f"stackroute.grammars.{name}")
    result = doctest.testmod(module, raise_on_error=False)
    assert result.failed == 0
