"""The crash harness's client: keeps sessions going against a server that is killed under it.

It runs in its own thread and never knows when a kill comes: a request that fails because the
server died is simply made again against the restarted server (whose URL the harness sets),
after re-reading what the server has, so nothing is done on the strength of an answer that
never arrived. Everything the server accepted (a 201 for a session or a catalog, a 200 for an
approval or rejection) is written down, to be checked against the end state.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from stackroute.bench.reliability.crash_plan import Job, catalog_tree, make_job, tag_of

REQUEST_TIMEOUT_S = 10.0
_POLL_S = 0.01


@dataclass
class Accepted:
    """What the server acknowledged."""

    sessions: dict[str, str] = field(default_factory=dict)  # session id -> job tag (201)
    catalogs: set[str] = field(default_factory=set)  # catalog ids (201)
    gates: list[tuple[str, str, str]] = field(default_factory=list)  # (sid, call_id, action)


class Driver:
    def __init__(self, *, catalog_id: str, seed: int, concurrency: int,
                 max_sessions: int | None = None) -> None:
        self.catalog_id = catalog_id
        self.rng = random.Random(seed)
        self.tree = catalog_tree()
        self.concurrency = concurrency
        self.max_sessions = max_sessions  # stop creating after this many (None: never)
        self.jobs: dict[str, Job] = {}
        self.accepted = Accepted()
        self.unexpected: list[str] = []  # answers that break the contract (5xx, wrong 4xx, …)
        self.num_requests = 0
        self.num_transport_errors = 0
        self.is_creating = True
        self.num_active = -1  # running + paused sessions at the last look (-1: not looked)
        self.base_url = ""
        self.base_urls: list[str] = []  # several instances: one per round, in turn
        self.generation = 0  # bumped by the harness at every restart
        self.dead_urls: set[str] = set()  # servers the harness has killed (or is killing)
        # The chaos run stops PostgreSQL now and then: meanwhile a 503 (store busy) or no
        # answer is the contract, counted here, not a failure.
        self.is_store_down = False
        self.num_refused_store_down = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="crash-driver", daemon=True)
        self._next_job = 0
        self._uploaded_in: set[int] = set()

    # -- control (harness thread) --------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def point_at_all(self, base_urls: list[str], generation: int) -> None:
        """Several instances over one database: each round goes to the next one, so a
        session is created, answered and watched through different instances."""
        self.base_urls, self.generation = list(base_urls), generation
        self.base_url = self.base_urls[0]

    @property
    def is_done_creating(self) -> bool:
        return self.max_sessions is not None and self._next_job >= self.max_sessions

    def mark_dead(self, base_url: str) -> None:
        """Called before the harness kills that server: errors from it are expected now."""
        self.dead_urls.add(base_url)

    def mark_alive(self, base_url: str) -> None:
        """That server answers again (the chaos run resumed it after pausing it)."""
        self.dead_urls.discard(base_url)

    # -- the loop (driver thread) --------------------------------------------------------------
    def _loop(self) -> None:
        with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
            num_rounds = 0
            while not self._stop.is_set():
                urls = self.base_urls or [self.base_url]
                url = urls[num_rounds % len(urls)]
                num_rounds += 1
                try:
                    self._round(client, url)
                except httpx.TransportError as e:
                    self.num_transport_errors += 1
                    if self.is_store_down:
                        self.num_refused_store_down += 1
                    elif url not in self.dead_urls:
                        # Not killed: a hang or a dropped connection is the server's fault.
                        self.unexpected.append(f"no answer from a live server: {e!r}")
                    time.sleep(0.02)
                    continue
                time.sleep(_POLL_S)

    def _round(self, client: httpx.Client, url: str) -> None:
        client.base_url = httpx.URL(url)  # every request of a round goes to one server
        if self.generation not in self._uploaded_in:
            self._upload_extra_catalog(client)
        paused = self._list(client, "paused")
        running = self._list(client, "running")
        for row in paused:
            self._answer_gate(client, row)
        self.num_active = len(paused) + len(running)
        if (self.is_creating and self.num_active < self.concurrency
                and not self.is_done_creating):
            self._create(client)

    def _request(self, client: httpx.Client, method: str, path: str,
                 expected: tuple[int, ...], **kwargs: Any) -> httpx.Response:
        self.num_requests += 1
        response = client.request(method, path, **kwargs)
        if response.status_code == 503 and self.is_store_down:
            self.num_refused_store_down += 1
        elif response.status_code not in expected:
            self.unexpected.append(f"{method} {path} -> {response.status_code}: "
                                   f"{response.text[:300]}")
        return response

    def _list(self, client: httpx.Client, status: str) -> list[dict[str, Any]]:
        r = self._request(client, "GET", "/v1/sessions", (200,),
                          params={"status": status, "limit": 1000})
        return list(r.json()["sessions"]) if r.status_code == 200 else []

    def _create(self, client: httpx.Client) -> None:
        job = make_job(self.rng, self._next_job, self.tree)
        self._next_job += 1
        self.jobs[job.tag] = job  # before the request: a lost 201 still leaves a known job
        r = self._request(client, "POST", "/v1/sessions", (201,),
                          json={"catalog": self.catalog_id, "task": job.task,
                                "auto_approve": job.is_auto_approve})
        if r.status_code == 201:
            self.accepted.sessions[r.json()["id"]] = job.tag

    def _answer_gate(self, client: httpx.Client, row: dict[str, Any]) -> None:
        sid = row["id"]
        view = self._request(client, "GET", f"/v1/sessions/{sid}", (200,))
        pending = view.json().get("pending") if view.status_code == 200 else None
        if not pending or not pending["is_gated"]:
            return
        tag = tag_of(row["task"])
        job = self.jobs.get(tag or "")
        if job is None:
            self.unexpected.append(f"session {sid} has an unknown task {row['task']!r}")
            return
        action = job.gate_action(pending["path"])
        # 409: the gate was already answered by a request whose answer was lost in a kill.
        r = self._request(client, "POST", f"/v1/sessions/{sid}/{action}", (200, 409),
                          json={"digest": pending["digest"]})
        if r.status_code == 200:
            self.accepted.gates.append((sid, pending["call_id"], action))

    def _upload_extra_catalog(self, client: httpx.Client) -> None:
        """One new small catalog per server start: a 201 must survive every later kill."""
        generation = self.generation
        extra = {"name": f"extra-{generation}", "description": "uploaded mid-run",
                 "children": [{"name": "noop", "description": "does nothing"}]}
        r = self._request(client, "POST", "/v1/catalogs", (201,), content=json.dumps(extra),
                          headers={"content-type": "application/json"})
        if r.status_code == 201:
            self.accepted.catalogs.add(r.json()["id"])
        self._uploaded_in.add(generation)
