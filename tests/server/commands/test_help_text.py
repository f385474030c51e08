"""Help text is shown as written: square brackets in a flag's help ("stackroute[qwen]",
"[default: 8000]") are text, not rich markup to be swallowed."""

from __future__ import annotations

import pytest
from stackroute.server.cli import app
from typer.testing import CliRunner


@pytest.mark.parametrize(("command", "shown"), [
    ("route", "pip install 'stackroute[qwen]'"),
    ("serve", "[default: 8000]"),
    ("serve", "[default: 127.0.0.1]"),
    ("mcp", "transformers | vllm | remote [default: transformers]"),
])
def test_brackets_in_help_are_shown(command: str, shown: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert shown in " ".join(result.output.split())  # as wrapped to the terminal
