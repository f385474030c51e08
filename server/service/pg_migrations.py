"""The PostgreSQL store's schema, as numbered migrations applied at start.

Each instance applies what the database lacks, in order, each migration in its own
transaction with its row in `stackroute_schema`, while holding a session-level advisory
lock: two instances starting at once take turns, and the second finds nothing to do. A
database with a version newer than this code knows is refused (an older instance must not
write to a schema it does not understand).
"""

from __future__ import annotations

import time
from typing import Any

ADVISORY_LOCK_KEY = 0x5374_6B52_6F75  # "StkRou": the lock migrations are applied under

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "sessions, transitions, catalogs, leaf executions, leases", """
CREATE TABLE catalogs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    source TEXT NOT NULL,
    format TEXT NOT NULL,
    created_unix DOUBLE PRECISION NOT NULL
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    catalog_id TEXT NOT NULL,
    status TEXT NOT NULL,
    task TEXT NOT NULL,
    is_flat BOOLEAN NOT NULL,
    is_auto_approve BOOLEAN NOT NULL,
    state TEXT NOT NULL,
    created_unix DOUBLE PRECISION NOT NULL,
    updated_unix DOUBLE PRECISION NOT NULL,
    -- the lease: who advances the session, until when (database clock), and its fencing
    -- token, bumped at every claim; a write carrying an older token is refused
    owner TEXT,
    lease_expires TIMESTAMPTZ,
    lease_token BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_status ON sessions (status, created_unix);
CREATE INDEX sessions_by_owner ON sessions (owner);
CREATE TABLE transitions (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE leaf_executions (
    call_id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    digest TEXT NOT NULL,
    is_finished BOOLEAN NOT NULL,
    result TEXT,
    error TEXT,
    started_unix DOUBLE PRECISION NOT NULL,
    finished_unix DOUBLE PRECISION
);
"""),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


class SchemaTooNewError(RuntimeError):
    """The database was migrated by a newer stackroute."""


def apply_migrations(conn: Any) -> list[int]:
    """Bring the database to `SCHEMA_VERSION`; return the versions applied now. `conn` is an
    autocommit psycopg connection."""
    conn.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS stackroute_schema (version INTEGER PRIMARY "
                     "KEY, name TEXT NOT NULL, applied_unix DOUBLE PRECISION NOT NULL)")
        applied = {int(r[0]) for r in conn.execute("SELECT version FROM stackroute_schema")}
        newest = max(applied, default=0)
        if newest > SCHEMA_VERSION:
            raise SchemaTooNewError(f"the database has schema version {newest}, newer than "
                                    f"this stackroute's {SCHEMA_VERSION}; upgrade stackroute")
        done = []
        for version, name, sql in MIGRATIONS:
            if version in applied:
                continue
            with conn.transaction():
                conn.execute(sql)
                conn.execute("INSERT INTO stackroute_schema (version, name, applied_unix) "
                             "VALUES (%s, %s, %s)", (version, name, time.time()))
            done.append(version)
        return done
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))
