"""PostgreSQL for the tests: a throwaway cluster started once per test session.

`pg_url` is a fresh, empty database per test. The server is, in order:
1. `STACKROUTE_TEST_PG_URL` (a superuser URL of a server you run; databases are created on it);
2. a throwaway cluster from the installed PostgreSQL binaries
   (`bench/reliability/pg_cluster.py`: initdb + pg_ctl in a temp folder, as `nobody` when the
   tests run as root), stopped at the end.
Without either the PostgreSQL tests skip, saying so, except under `CI=true`, where missing
PostgreSQL is a failure: CI must test the PostgreSQL store, not skip it silently.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

URL_ENV = "STACKROUTE_TEST_PG_URL"
_names = itertools.count()


class _Server:
    """Creates databases on a PostgreSQL server given by a superuser URL."""

    def __init__(self, url: str) -> None:
        self.url = url

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path=f"/{name}"))


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL is required in CI: {reason}")
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[_Server]:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        _unavailable("psycopg / psycopg_pool are not installed (pip install -e '.[dev]')")
    configured = os.environ.get(URL_ENV)
    if configured:
        yield _Server(configured)
        return
    from stackroute.bench.reliability.pg_cluster import PgCluster, find_bindir

    if find_bindir() is None:
        _unavailable(f"no PostgreSQL binaries (apt-get install postgresql) and {URL_ENV} "
                     "is not set")
    cluster = PgCluster.start()
    try:
        yield _Server(cluster.url())
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_server: _Server) -> str:
    """A fresh empty database on the session's PostgreSQL server."""
    return pg_server.create_database(f"t{os.getpid()}_{next(_names)}")
