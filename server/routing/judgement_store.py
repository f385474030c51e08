"""The model's answers to request-free questions, kept on disk across processes.

The abstention check asks, once per leaf, how the model judges that leaf for a content-free
request (`abstention.NEUTRAL_REQUEST`): the answer depends on the leaf, the model and the
question's wording, never on the request, yet a process that starts fresh (`stackroute run`,
a restarted service, a benchmark) asked it again for every leaf it met: one model call of a
run's six at the median on Seal-Tools with the 1.5B tier. Here each answer is kept under
`sha256(engine, model, dtype, prompt)` in one append-only JSON-lines file per model
(`<stackroute cache dir>/judgements/`): a line is appended with one `write` in append mode,
so processes sharing the file add lines without clobbering each other; a torn or foreign
line is skipped on reading, and a changed question or model has other keys.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path

from stackroute.runtime.prompt import Prompt
from stackroute.server.engines.base import EngineInfo

log = logging.getLogger(__name__)


def judgement_dir() -> Path:
    """`<stackroute cache dir>/judgements` (`$STACKROUTE_CACHE_DIR` or `~/.cache/stackroute`)."""
    from stackroute.server.engines.model_store import default_cache_dir

    return default_cache_dir() / "judgements"


class JudgementStore:
    """Log-odds answers by prompt, for one engine and model; read once, appended to."""

    def __init__(self, info: EngineInfo, *, directory: Path | None = None) -> None:
        self.scope = f"{info.engine}\n{info.model}\n{info.dtype}"
        name = hashlib.sha256(self.scope.encode()).hexdigest()[:16]
        self.path = (directory or judgement_dir()) / f"{name}.jsonl"
        self._answers: dict[str, float] | None = None
        self._lock = threading.Lock()

    def get(self, prompt: Prompt) -> float | None:
        with self._lock:
            return self._loaded().get(self._key(prompt))

    def put(self, prompt: Prompt, value: float) -> None:
        key = self._key(prompt)
        line = json.dumps({"key": key, "value": value}) + "\n"
        with self._lock:
            self._loaded()[key] = value
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)
            except OSError as e:  # a read-only cache costs a model call next time, no more
                log.warning("could not keep a judgement in %s: %s", self.path, e)

    def _key(self, prompt: Prompt) -> str:
        text = json.dumps([self.scope, [[m.role, m.content] for m in prompt.messages]])
        return hashlib.sha256(text.encode()).hexdigest()

    def _loaded(self) -> dict[str, float]:
        if self._answers is None:
            self._answers = {}
            try:
                lines = self.path.read_text(encoding="utf-8").splitlines()
            except OSError:
                lines = []
            for line in lines:
                try:
                    entry = json.loads(line)
                    self._answers[str(entry["key"])] = float(entry["value"])
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by a crash, or not ours
        return self._answers
