"""One manifest per results folder: `manifest.json`, the same schema for every experiment.

It says what question the run answers, the command line, the commit (and whether the tree was
dirty), the machine, the engine and model, when it started and finished, and a flat summary of
its headline numbers. `stackroute bench index` lists every results folder from these files
(folders without one are "historical": written before the schema, their raw files untouched).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stackroute.bench.environment import git_state, hardware

MANIFEST = "manifest.json"
SCHEMA_VERSION = 1
Headline = float | int | str | bool | None


class ManifestError(ValueError):
    """A manifest.json that is not this schema."""


@dataclass(frozen=True)
class Manifest:
    """What `manifest.json` holds (schema version 1)."""

    question: str
    command: str
    commit: str | None
    is_dirty: bool | None
    machine: dict[str, Any]
    engine: str | None
    model: str | None
    started: str  # ISO 8601, UTC
    finished: str
    summary: dict[str, Headline] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, *, source: str = "manifest.json") -> Manifest:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise ManifestError(f"{source}: expected JSON, got {e}") from e
        if not isinstance(raw, dict):
            raise ManifestError(f"{source}: expected an object, got {type(raw).__name__}")
        names = set(cls.__dataclass_fields__)
        missing = names - set(raw) - {"summary", "schema_version"}
        unknown = set(raw) - names
        if missing or unknown:
            raise ManifestError(f"{source}: expected the fields {sorted(names)}; missing "
                                f"{sorted(missing)}, unknown {sorted(unknown)}")
        return cls(**raw)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed (`stackroute bench NAME …` when run through the CLI)."""
    args = sys.argv if argv is None else argv
    return shlex.join(["stackroute" if args and args[0].endswith("stackroute") else
                       Path(args[0]).name if args else "python", *args[1:]])


def machine() -> dict[str, Any]:
    """The hardware with the load at the end of the run; a shared VM says so in its load."""
    return hardware()


def build_manifest(*, question: str, command: str, engine: str | None, model: str | None,
                   started: str, summary: Mapping[str, Headline] | None = None,
                   git: Mapping[str, Any] | None = None) -> Manifest:
    """A manifest for a run that started at `started` and finishes now. `git`: the state read
    when the run started (default: read now)."""
    state = dict(git) if git is not None else git_state()
    changed = state.get("num_changed_paths")
    return Manifest(question=question, command=command, commit=state.get("commit"),
                    is_dirty=None if changed is None else changed > 0, machine=machine(),
                    engine=engine, model=model, started=started, finished=now(),
                    summary=dict(summary or {}))


def write_manifest(out_dir: Path, manifest: Manifest) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / MANIFEST
    path.write_text(manifest.to_json(), encoding="utf-8")
    return path


def read_manifest(folder: Path) -> Manifest | None:
    """The folder's manifest, or None if it has none (a historical folder)."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    return Manifest.from_json(path.read_text(encoding="utf-8"), source=str(path))


def headline_numbers(summary: Mapping[str, Any], *, limit: int = 12) -> dict[str, Headline]:
    """The top-level scalars of a summary (numbers, strings, flags), at most `limit`."""
    picked: dict[str, Headline] = {}
    for key, value in summary.items():
        if isinstance(value, (int, float, str, bool)) or value is None:
            picked[str(key)] = value
        if len(picked) >= limit:
            break
    return picked
