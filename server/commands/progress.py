"""Progress bars with an ETA for the long commands (`eval`, `calibrate`, `lint`,
`build-tree`, `bench`): drawn on stderr while stdout is a terminal, and nothing at all when
it is not (a pipe, a file, `--json` read by a program, CI logs).

    with progress_bar("eval", total=len(items)) as bar:
        for item in items:
            ...
            bar.advance()
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.embeddings.vector_cache import CachedEmbedder

EMBED_CHUNK = 64  # texts per embedding call while a bar shows (a step every second or so)


class Bar(Protocol):
    def advance(self, n: int = 1) -> None: ...

    def add_total(self, n: int) -> None:
        """More work than first announced (the total grows by `n`)."""
        ...

    def describe(self, description: str) -> None: ...


class _RichBar:
    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress = progress
        self._task = task

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def add_total(self, n: int) -> None:
        total = self._progress.tasks[self._task].total or 0
        self._progress.update(self._task, total=total + n)

    def describe(self, description: str) -> None:
        self._progress.update(self._task, description=description)


def is_interactive(console: Console | None = None) -> bool:
    """Bars are drawn only when stdout is a terminal (and the console they draw on is)."""
    target = console or _stderr()
    return sys.stdout.isatty() and target.is_terminal


def new_progress(console: Console | None = None, *, is_enabled: bool | None = None) -> Progress:
    """A rich `Progress` with the columns every bar shows (what, the bar, done/total,
    elapsed, ETA), disabled (it draws nothing) unless `is_interactive()`."""
    target = console or _stderr()
    enabled = is_interactive(target) if is_enabled is None else is_enabled
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                    TimeRemainingColumn(), console=target, transient=True,
                    disable=not enabled)


@contextmanager
def progress_bar(description: str, *, total: int | None = None,
                 console: Console | None = None,
                 is_enabled: bool | None = None) -> Iterator[Bar]:
    """A bar on `console` (stderr by default); it draws nothing unless `is_interactive()` (or
    `is_enabled` says otherwise: tests draw on a recording console)."""
    with new_progress(console, is_enabled=is_enabled) as progress:
        yield _RichBar(progress, progress.add_task(description, total=total))


class EmbeddingProgress:
    """Wraps an embedder so each `embed` call advances `bar` by the texts it embedded, in
    chunks of `EMBED_CHUNK` (the model's own batching is unchanged within a chunk). Wrap the
    model, not a vector cache, so only the texts that need the model count."""

    def __init__(self, inner: TextEmbedder, bar: Bar) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.bar = bar

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.bar.add_total(len(texts))
        parts = []
        for start in range(0, len(texts), EMBED_CHUNK):
            chunk = texts[start:start + EMBED_CHUNK]
            parts.append(self.inner.embed(chunk))
            self.bar.advance(len(chunk))
        if not parts:
            return self.inner.embed(texts)
        return np.concatenate(parts, axis=0)


def _stderr() -> Console:
    from stackroute.server.commands.common import err_console

    return err_console


def cached_embedder_with_progress(bar: Bar) -> CachedEmbedder:
    """The packaged embedding model behind the on-disk vector cache (what `lint` and
    `build-tree` use by default), its model calls advancing `bar`. Raises `InputError` when
    no embedding model is installed, as `CachedEmbedder.for_default_model` does."""
    base = CachedEmbedder.for_default_model()
    return CachedEmbedder(factory=lambda: EmbeddingProgress(base.embedder, bar), key=base.key,
                          dim=base.dim)
