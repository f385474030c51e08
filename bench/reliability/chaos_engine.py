"""The chaos run's engine: the paced scripted engine, except that compiling a catalog whose
name starts with `slow-` takes `$STACKROUTE_CHAOS_PREPARE_S` seconds.

An instance that takes over a session on a catalog it has not loaded compiles the catalog
inside the takeover, holding the claims it just made. With a compile longer than the lease,
those claims lapse and another instance claims the same sessions before the first one loads
them: the claim/claim/load interleaving of issue 28 finding 2, made to happen rather than
hoped for. `--engine stackroute.bench.reliability.chaos_engine:create`.
"""

from __future__ import annotations

import os
import time
from typing import Any

from stackroute.bench.fixtures.scripted_engine import PACED_DELAY_S, ScriptedEngine
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import PrepareStats

PREPARE_ENV = "STACKROUTE_CHAOS_PREPARE_S"
SLOW_PREFIX = "slow-"


class ChaosEngine(ScriptedEngine):
    def __init__(self, *, delay_s: float, slow_prepare_s: float) -> None:
        super().__init__(delay_s=delay_s)
        self.slow_prepare_s = slow_prepare_s

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        if tree.name.startswith(SLOW_PREFIX):
            time.sleep(self.slow_prepare_s)
        return super().prepare(tree)


def create(**options: Any) -> ChaosEngine:
    return ChaosEngine(delay_s=PACED_DELAY_S / 2,
                       slow_prepare_s=float(os.environ.get(PREPARE_ENV, "0")))
