"""The chaos run's options (full size and `--smoke`) and its report
(bench/reliability/chaos.py runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stackroute.bench.reliability.crash_checks import CrashReport


@dataclass(frozen=True, kw_only=True)
class ChaosOptions:
    instances: int = 3
    sessions: int = 60  # created by the client (slow-takeover sessions come on top)
    kills: int = 12
    pg_restarts: int = 3
    slow_takeovers: int = 4
    slow_sessions: int = 3  # per slow takeover
    concurrency: int = 6
    lease_s: float = 2.0
    seed: int = 0
    min_delay_s: float = 0.5  # before each event
    max_delay_s: float = 2.0
    out: Path | None = None

    @property
    def pg_down_s(self) -> float:
        return 1.5 * self.lease_s  # longer than a lease: every instance's leases lapse

    @property
    def slow_prepare_s(self) -> float:
        return 2.0 * self.lease_s  # a takeover slower than the lease


SMOKE = ChaosOptions(instances=3, sessions=5, kills=1, pg_restarts=1, slow_takeovers=1,
                     slow_sessions=2, concurrency=3, lease_s=1.5, min_delay_s=0.3,
                     max_delay_s=0.8)


@dataclass
class ChaosReport:
    crash: CrashReport = field(default_factory=CrashReport)  # kills, sessions, the checks
    pg_restarts: int = 0
    slow_takeovers: int = 0
    claimants_frozen: int = 0  # SIGSTOPped between their claim and their load
    sessions_claimed_twice_in_takeover: int = 0  # the forced claim/claim/load interleaving
    stale_writes_refused: int = 0  # instances fenced off ("lease token … is stale" in logs)
    requests_refused_while_pg_down: int = 0
    catalog_deletes_refused_in_use: int = 0
    catalogs_deleted: int = 0
    creates_refused_on_deleted_catalog: int = 0
    side_effects: int = 0  # rows in the handlers' own table
    duplicates: int = 0  # executions beyond the first of a call
    lost: int = 0  # accepted sessions gone or not done
    failures: list[str] = field(default_factory=list)

    @property
    def is_ok(self) -> bool:
        return not self.failures and self.crash.is_ok

    def summary(self) -> str:
        c = self.crash
        return "\n".join([
            f"{c.instances} instances over PostgreSQL; kills {c.kills}, PostgreSQL restarts "
            f"{self.pg_restarts} ({self.requests_refused_while_pg_down} requests refused "
            f"while it was down), slow takeovers {self.slow_takeovers} "
            f"({self.claimants_frozen} claimants frozen between claim and load, "
            f"{self.sessions_claimed_twice_in_takeover} sessions claimed twice in one, "
            f"{self.stale_writes_refused} stale-token writes refused)",
            f"catalogs: {self.catalog_deletes_refused_in_use} deletes refused while in use, "
            f"{self.catalogs_deleted} deleted, {self.creates_refused_on_deleted_catalog} "
            "creates refused on a deleted catalog",
            f"sessions {c.sessions} ({c.sessions_accepted} accepted, "
            f"{c.sessions_through_kills} through a kill), gate answers {c.gates_accepted}, "
            f"side effects counted {self.side_effects}, duplicates {self.duplicates}, "
            f"lost {self.lost}, interrupted calls {c.calls_interrupted} "
            f"({c.calls_finished_after_takeover} finished by a holder fenced off meanwhile), "
            f"{c.duration_s:.0f} s",
            "OK: no session lost, no side effect twice, every approval applied once"
            if self.is_ok else "FAILED:\n  " + "\n  ".join((self.failures + c.failures)[:30]),
        ])
