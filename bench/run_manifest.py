"""The manifest the bench CLI leaves in a run's `--out` folder (bench/manifest.py's schema).

`stackroute bench NAME … --out DIR` records when it started and the commit then; when the
experiment returns 0 and DIR exists without a `manifest.json` of the experiment's own, it
writes one: the question from bench/commands.py, the command line, `--engine`/`--model` as
given, and the headline numbers from the experiment's `headline(out_dir)` if it has one, else
the scalars of DIR/summary.json (one level of nesting flattened).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackroute.bench.commands import BY_NAME
from stackroute.bench.environment import git_state
from stackroute.bench.manifest import (
    MANIFEST,
    Headline,
    build_manifest,
    headline_numbers,
    now,
    write_manifest,
)

DEFAULT_ENGINE = "transformers"


def option(args: Sequence[str], name: str) -> str | None:
    """The value of `--name V` or `--name=V` in `args` (the last one), else None."""
    found = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(name + "="):
            found = arg.partition("=")[2]
    return found


def flat_scalars(summary: Mapping[str, Any]) -> dict[str, Headline]:
    flat: dict[str, Any] = {}
    for key, value in summary.items():
        if isinstance(value, Mapping):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return headline_numbers(flat)


@dataclass(frozen=True)
class RunRecorder:
    name: str
    args: tuple[str, ...]
    started: str
    git: dict[str, Any]

    @classmethod
    def start(cls, name: str, args: Sequence[str]) -> RunRecorder:
        return cls(name, tuple(args), now(), git_state())

    @property
    def out_dir(self) -> Path | None:
        out = option(self.args, "--out")
        return Path(out) if out else None

    def finish(self, module: Any) -> Path | None:
        """Write DIR/manifest.json (see the module docstring); the path, or None."""
        out = self.out_dir
        if out is None or not out.is_dir() or (out / MANIFEST).exists():
            return None
        headline = getattr(module, "headline", None)
        if callable(headline):
            summary = dict(headline(out))
        elif (out / "summary.json").is_file():
            try:
                raw = json.loads((out / "summary.json").read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                raw = {}
            summary = flat_scalars(raw) if isinstance(raw, Mapping) else {}
        else:
            summary = {}
        experiment = BY_NAME.get(self.name)
        manifest = build_manifest(
            question=experiment.question if experiment else self.name,
            command=shlex.join(["stackroute", "bench", self.name, *self.args]),
            engine=option(self.args, "--engine") or DEFAULT_ENGINE,
            model=option(self.args, "--model"), started=self.started, summary=summary,
            git=self.git)
        return write_manifest(out, manifest)
