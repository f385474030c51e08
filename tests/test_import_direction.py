"""Dependencies point one way (DESIGN.md, "Layout"): read every module's imports from its
source, lazy imports inside functions included, and check each against the layer rules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = {"runtime": "stackroute.runtime", "grammars": "stackroute.grammars",
               "server": "stackroute.server", "bench": "stackroute.bench"}

# (importer prefix, imported prefix): never allowed.
FORBIDDEN = (
    ("stackroute.runtime", "stackroute.grammars"),
    ("stackroute.runtime", "stackroute.server"),
    ("stackroute.runtime", "stackroute.bench"),
    ("stackroute.grammars", "stackroute.server"),
    ("stackroute.grammars", "stackroute.bench"),
    ("stackroute.server", "stackroute.bench"),
    ("stackroute.server.engines", "stackroute.server.http"),
    ("stackroute.server.engines", "stackroute.server.service"),
    ("stackroute.server.engines", "stackroute.server.routing"),
    ("stackroute.server.engines", "stackroute.server.tools"),
    ("stackroute.server.engines", "stackroute.server.settings"),
    ("stackroute.server.engines", "stackroute.server.cli"),
    ("stackroute.server.embeddings", "stackroute.server.routing"),
    ("stackroute.server.embeddings", "stackroute.server.service"),
    ("stackroute.server.embeddings", "stackroute.server.http"),
    ("stackroute.server.routing", "stackroute.server.service"),
    ("stackroute.server.routing", "stackroute.server.http"),
    ("stackroute.server.routing", "stackroute.server.tools"),
    ("stackroute.server.routing", "stackroute.server.cli"),
    ("stackroute.server.service", "stackroute.server.http"),
    ("stackroute.server.service", "stackroute.server.cli"),
    ("stackroute.server.tools", "stackroute.server.http"),
    ("stackroute.server.tools", "stackroute.server.service"),
    ("stackroute.server.http", "stackroute.server.cli"),
    ("stackroute.server.http", "stackroute.server.commands"),
    ("stackroute.server.service", "stackroute.server.commands"),
    ("stackroute.server.routing", "stackroute.server.commands"),
    ("stackroute.server.engines", "stackroute.server.commands"),
)


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    package = SOURCE_DIRS[rel.parts[0]]
    parts = [*package.split("."), *rel.parts[1:]]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return [n for n in names if n.startswith("stackroute.")]


def _modules() -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py"))


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_every_source_folder_is_scanned() -> None:
    found = {p.relative_to(ROOT).parts[0] for p in _modules()}
    assert found == set(SOURCE_DIRS)


@pytest.mark.parametrize("rule", FORBIDDEN, ids=lambda r: f"{r[0]}-x-{r[1]}")
def test_no_import_against_the_layering(rule: tuple[str, str]) -> None:
    importer, imported = rule
    offenders = [f"{_module_name(p)} imports {name}"
                 for p in _modules() if _within(_module_name(p), importer)
                 for name in _imports(p) if _within(name, imported)]
    assert offenders == []


def test_the_rules_can_fail() -> None:
    """The checker sees lazy imports inside functions (how the commands import everything)."""
    commands = ROOT / "server" / "commands" / "routing.py"
    assert any(_within(n, "stackroute.server.routing.router") for n in _imports(commands))
