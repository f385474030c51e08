"""Leaf handlers for the chaos run: each execution is a row in the handler's own PostgreSQL
table, so "no side effect twice" is counted in the database, not inferred from a log.

The table (`chaos_side_effects`) lives in the service's database but is no part of the
service: the chaos run creates it, the handlers insert into it, and the run counts
`GROUP BY leaf, ref HAVING COUNT(*) > 1` at the end. It has no unique key on purpose: a second
execution must be recorded, not refused. The database URL is `$STACKROUTE_CHAOS_DB`, read at
each call (the run sets it for the servers it starts).

PostgreSQL is restarted during the run, so an insert that cannot reach it is retried for up
to `RETRY_S` seconds: the side effect happens once the database is back, as a real payment
service's would, and the handler's outcome does not depend on when the outage was.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from stackroute.bench.reliability.crash_handlers import result_of

DB_ENV = "STACKROUTE_CHAOS_DB"
TABLE = "chaos_side_effects"
RETRY_S = 60.0
SLEEP_S = 0.004  # before and after the insert, so a kill can land on either side of it


def create_table(db_url: str) -> None:
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (leaf TEXT NOT NULL, ref TEXT NOT "
                     "NULL, amount BIGINT NOT NULL, pid INTEGER NOT NULL, at_unix DOUBLE "
                     "PRECISION NOT NULL)")


def side_effects(db_url: str) -> list[dict[str, Any]]:
    """Every execution recorded, in the crash harness's log-line shape."""
    import psycopg

    with psycopg.connect(db_url) as conn:
        rows = conn.execute(f"SELECT leaf, ref, amount, pid FROM {TABLE} ORDER BY at_unix")
        return [{"leaf": leaf, "arguments": {"ref": ref, "amount": amount}, "pid": pid}
                for leaf, ref, amount, pid in rows]


def duplicates(db_url: str) -> int:
    """Executions beyond the first of each call (leaf, ref): the side effects done twice."""
    import psycopg

    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM "
                           f"{TABLE} GROUP BY leaf, ref) AS calls").fetchone()
    return int(row[0]) if row else 0


def _record(leaf: str, arguments: dict[str, Any]) -> None:
    import psycopg

    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            with psycopg.connect(os.environ[DB_ENV], autocommit=True, connect_timeout=2) as c:
                c.execute(f"INSERT INTO {TABLE} (leaf, ref, amount, pid, at_unix) VALUES "
                          "(%s, %s, %s, %s, %s)", (leaf, str(arguments["ref"]),
                                                   int(arguments["amount"]), os.getpid(),
                                                   time.time()))
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _recording(leaf: str) -> Callable[..., dict[str, Any]]:
    def handler(**arguments: Any) -> dict[str, Any]:
        time.sleep(SLEEP_S)
        _record(leaf, arguments)
        time.sleep(SLEEP_S)
        return result_of(leaf, arguments)

    handler.__name__ = leaf
    return handler


send_transfer = _recording("send_transfer")
check_limit = _recording("check_limit")
send_wire = _recording("send_wire")
fx_quote = _recording("fx_quote")
freeze_card = _recording("freeze_card")
card_status = _recording("card_status")
update_address = _recording("update_address")
statement = _recording("statement")
