"""The crash and chaos runs' checks and report: the database as a kill left it, the end state
read back through the API, and the verdict (bench/reliability/crash_harness.py lists what is
checked).
Shared by `crash_harness` (kills) and `chaos` (kills, PostgreSQL restarts, slow takeovers,
deleted catalogs)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from stackroute.bench.reliability.crash_driver import Driver
from stackroute.bench.reliability.crash_plan import catalog_tree, reference_run, tag_of
from stackroute.runtime.governance import Limits
from stackroute.runtime.trace import TraceEvent
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.service.store_records import strict_json

INTERRUPTED = "interrupted"  # how StoreExecutor's error for a call killed mid-handler begins


@dataclass
class CrashReport:
    instances: int = 1
    store: str = "sqlite"
    kills: int = 0
    kills_with_progress: int = 0  # kills after which the database held new transitions
    positions: dict[str, int] = field(default_factory=dict)  # running sessions' state at kills
    restart_s_p50: float = 0.0
    restart_s_max: float = 0.0
    sessions: int = 0
    sessions_accepted: int = 0  # 201 received
    sessions_orphaned: int = 0  # stored, but the 201 was lost in a kill
    sessions_through_kills: int = 0  # running or paused at one kill at least
    transitions: int = 0
    leaf_executions: int = 0
    calls_interrupted: int = 0
    calls_finished_after_takeover: int = 0  # reported interrupted; its fenced holder finished it
    results_replayed: int = 0  # recorded results handed back instead of running again
    gates_accepted: int = 0
    catalogs_accepted: int = 0
    requests: int = 0
    transport_errors: int = 0
    duration_s: float = 0.0
    failures: list[str] = field(default_factory=list)
    workdir: str = ""

    @property
    def is_ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        lines = [
            f"{self.instances} instance(s) over {self.store}; "
            f"kills survived: {self.kills} ({self.kills_with_progress} with new transitions "
            f"saved since the restart before), restarts p50 {self.restart_s_p50:.2f} s, max "
            f"{self.restart_s_max:.2f} s",
            f"where running sessions were at the kills: {dict(sorted(self.positions.items()))}",
            f"sessions: {self.sessions} ({self.sessions_accepted} with a 201, "
            f"{self.sessions_orphaned} stored whose 201 was lost), "
            f"{self.sessions_through_kills} lived through a kill",
            f"transitions: {self.transitions}, leaf executions: {self.leaf_executions}, "
            f"interrupted calls: {self.calls_interrupted}, replayed results: "
            f"{self.results_replayed}, gate answers accepted: {self.gates_accepted}, "
            f"catalogs accepted: {self.catalogs_accepted}",
            f"requests: {self.requests} ({self.transport_errors} cut by kills), "
            f"{self.duration_s:.0f} s",
            "OK: nothing lost, nothing run twice, traces equal the uninterrupted runs"
            if self.is_ok else f"FAILED ({len(self.failures)}):\n  " + "\n  ".join(
                self.failures[:30]),
        ]
        return "\n".join(lines)


# -- reading the database as a kill left it ------------------------------------------------------
def read_db(db: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a read-only query, from the SQLite file or the PostgreSQL URL."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as pg:
            return [tuple(r) for r in pg.execute(sql).fetchall()]
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in conn.execute(sql).fetchall()]
    finally:
        conn.close()


def inspect_db(db: str) -> tuple[dict[str, list[dict[str, Any]]], Counter[str], int]:
    """Each session's saved trace (comparable events), where each running session was, and
    the number of transitions saved."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for sid, event in read_db(db, "SELECT session_id, event FROM transitions "
                                "ORDER BY session_id, seq"):
        traces.setdefault(sid, []).append(comparable(json.loads(event)))
    executions = {cid: bool(done) for cid, done in read_db(
        db, "SELECT call_id, is_finished FROM leaf_executions")}
    positions: Counter[str] = Counter()
    for status, state_json in read_db(db, "SELECT status, state FROM sessions WHERE "
                                        "status IN ('running', 'paused')"):
        pending = json.loads(state_json)["pending"]
        if status == "paused":
            positions["paused_at_gate"] += 1
        elif pending is None:
            positions["routing"] += 1  # between transitions or inside a routing call
        elif pending["call_id"] not in executions:
            positions["leaf_pending_not_begun"] += 1
        elif not executions[pending["call_id"]]:
            positions["inside_handler"] += 1
        else:
            positions["handler_done_result_unsaved"] += 1
    total = sum(len(t) for t in traces.values())
    return traces, positions, total


# -- the end state -------------------------------------------------------------------------------
@dataclass
class FinalState:
    sessions: dict[str, dict[str, Any]]  # id -> session view (with state)
    traces: dict[str, list[dict[str, Any]]]  # id -> trace events as dicts
    catalogs: set[str]


def final_state(base_url: str) -> FinalState:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        rows = client.get("/v1/sessions", params={"limit": 1000}).json()["sessions"]
        sessions, traces = {}, {}
        for row in rows:
            sid = row["id"]
            sessions[sid] = client.get(f"/v1/sessions/{sid}",
                                       params={"include_state": True}).json()
            text = client.get(f"/v1/sessions/{sid}/trace").text
            traces[sid] = [json.loads(line) for line in text.splitlines() if line]
        catalogs = {c["id"] for c in client.get("/v1/catalogs").json()["catalogs"]}
    return FinalState(sessions, traces, catalogs)


def comparable(event: dict[str, Any]) -> dict[str, Any]:
    data = TraceEvent.from_dict(event).comparable()
    if "detail" in data:
        data["detail"] = {k: v for k, v in data["detail"].items() if k != "is_replayed"}
    return dict(json.loads(strict_json(data)))


def verify(report: CrashReport, driver: Driver, final: FinalState,
            snapshots: list[dict[str, list[dict[str, Any]]]], log: list[dict[str, Any]],
            db: str, *, tree: CapabilityTree | None = None) -> None:
    """`tree`: the catalog the sessions ran (default `crash_plan.CATALOG`), for the reference
    runs (a confirmation's digest binds the leaf's handler)."""
    fail = report.failures.append
    tree = tree or catalog_tree()
    accepted = driver.accepted
    report.sessions = len(final.sessions)
    report.sessions_accepted = len(accepted.sessions)
    report.catalogs_accepted = len(accepted.catalogs)
    if report.kills and not accepted.sessions:
        # Nothing lost because nothing ran: a vacuous run is a failure, not a pass.
        fail(f"no session was accepted in {report.kills} kills ({driver.num_requests} "
             f"requests, {driver.num_transport_errors} cut by kills): the run tested nothing")
    report.gates_accepted = len(accepted.gates)
    for sid in accepted.sessions:
        if sid not in final.sessions:
            fail(f"session {sid} was accepted (201) and is gone")
    for cid in accepted.catalogs - final.catalogs:
        fail(f"catalog {cid} was accepted (201) and is gone")
    calls_by_key: dict[tuple[str, str], str] = {}  # (leaf, ref) -> call id
    executed: set[str] = set()
    interrupted_calls: set[str] = set()
    for sid, view in final.sessions.items():
        trace = final.traces[sid]
        report.transitions += len(trace)
        report.sessions_orphaned += sid not in accepted.sessions
        report.sessions_through_kills += any(
            sid in s and s[sid][-1]["kind"] != "finish" for s in snapshots)
        job = driver.jobs.get(str(tag_of(view["task"])))
        if job is None:
            fail(f"session {sid} runs a task no job wrote: {view['task']!r}")
            continue
        if view["status"] != "done":
            fail(f"session {sid} ({job.tag}) ended {view['status']}: {view.get('error')}")
        if [e["seq"] for e in trace] != list(range(len(trace))):
            fail(f"session {sid}: trace seqs are not 0..{len(trace) - 1}")
        got = [comparable(e) for e in trace]
        for i, snapshot in enumerate(snapshots):
            saved = snapshot.get(sid, [])
            if got[:len(saved)] != saved:
                fail(f"session {sid}: what was saved at kill {i + 1} is not a prefix of its "
                     "final trace")
        interrupted: dict[str, str] = {}
        for e in trace:
            detail = e.get("detail", {})
            if e["kind"] == "leaf_pending":
                calls_by_key[(detail["leaf"].rsplit("/", 1)[-1],
                              e["arguments"]["ref"])] = detail["call_id"]
            if e["kind"] == "leaf_result":
                if detail.get("is_replayed") and e.get("error") is None:
                    report.results_replayed += 1
                if (e.get("error") or "").startswith(INTERRUPTED):
                    interrupted[detail["call_id"]] = e["error"]
                elif e.get("error") is None:
                    executed.add(detail["call_id"])
        interrupted_calls.update(interrupted)
        reference = reference_run(tree, job, run_id=sid,
                                  limits=Limits.from_dict(view["state"]["limits"]),
                                  interrupted=interrupted)
        want = [comparable(e.to_dict()) for e in reference.trace]
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                      min(len(got), len(want)))
            fail(f"session {sid} ({job.tag}): trace differs from the uninterrupted run at "
                 f"event {at}: {got[at:at + 1]} != {want[at:at + 1]}")
    for sid, call_id, action in accepted.gates:
        trace = final.traces.get(sid, [])
        answers = [e["kind"] for e in trace if e["kind"] in ("gate_approve", "gate_reject")
                   and e.get("detail", {}).get("call_id") == call_id]
        if answers != [f"gate_{action}"]:  # applied exactly once, and as it was accepted
            fail(f"session {sid}: the {action} of {call_id} was accepted (200); the trace "
                 f"holds {answers or 'no answer'}")
    report.calls_interrupted = len(interrupted_calls)
    report.leaf_executions = len(log)
    runs = Counter(calls_by_key.get((line["leaf"], line["arguments"]["ref"]), "?")
                   for line in log)
    for call_id, count in runs.items():
        if call_id == "?":
            fail(f"{count} handler execution(s) match no call in any trace")
        elif count > 1:
            fail(f"call {call_id} ran {count} times")
    for call_id in executed - set(runs):
        fail(f"call {call_id} has a result but its handler never ran")
    for call_id in set(runs) - executed - interrupted_calls - {"?"}:
        fail(f"call {call_id} ran but its trace shows no result")
    unfinished = {r[0] for r in read_db(db, "SELECT call_id FROM leaf_executions WHERE NOT "
                                          "is_finished")}
    if not unfinished <= interrupted_calls:
        fail(f"calls begun and never finished {sorted(unfinished - interrupted_calls)} are "
             f"not reported interrupted ({sorted(interrupted_calls)} are)")
    # Reported interrupted, yet finished in the store: the holder that began the call lost
    # its lease while the handler ran (frozen, or PostgreSQL away longer than a lease), the
    # new holder reported the call instead of running it again, and the first one recorded
    # the outcome afterwards (finish_leaf is not fenced: the handler did run). Its side
    # effect must still have happened exactly once.
    late = interrupted_calls - unfinished
    report.calls_finished_after_takeover = len(late)
    for call_id in sorted(late):
        if runs.get(call_id, 0) != 1:
            fail(f"call {call_id} was reported interrupted and finished later, but its "
                 f"handler ran {runs.get(call_id, 0)} times")
