"""The `db` setting: which store a URL names, and URLs the server cannot serve refused at start
(before this, `--db postgresql:/…` or any URL silently became a SQLite file of that name)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from stackroute.server.service.store_url import StoreUrl, StoreUrlError, parse_store_url
from stackroute.server.settings import ServerSettings, SettingsError


@pytest.mark.parametrize(("value", "expected"), [
    ("./stackroute.db", StoreUrl("sqlite", "./stackroute.db")),
    ("/var/lib/s.db", StoreUrl("sqlite", "/var/lib/s.db")),
    (":memory:", StoreUrl("sqlite", ":memory:")),
    ("sqlite:///rel/s.db", StoreUrl("sqlite", "rel/s.db")),
    ("sqlite:////abs/s.db", StoreUrl("sqlite", "/abs/s.db")),
    ("postgresql://u:pw@db:5432/app", StoreUrl("postgresql", "postgresql://u:pw@db:5432/app")),
    ("postgres://u@db/app", StoreUrl("postgresql", "postgresql://u@db/app")),
    ("postgresql+psycopg://u@db/app", StoreUrl("postgresql", "postgresql://u@db/app")),
])
def test_store_urls_name_a_backend_and_target(value: str, expected: StoreUrl) -> None:
    assert parse_store_url(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("postgresql:/postgres@127.0.0.1:5432/postgres", "two slashes, then host"),
    ("mysql://u@h/db", "scheme 'mysql', which this server does not serve"),
    ("sqlite:/s.db", "must be 'sqlite:///' followed by the file's path"),
    ("sqlite:///", "must be 'sqlite:///' followed by the file's path"),
    ("  ", "db is empty"),
])
def test_urls_the_server_cannot_serve_are_refused(value: str, expected: str) -> None:
    with pytest.raises(StoreUrlError, match=expected) as caught:
        parse_store_url(value)
    assert "expected 'sqlite:///PATH', a file path, or 'postgresql://" in str(caught.value)
    with pytest.raises(SettingsError, match="db: "):
        ServerSettings.load(db=value)


def test_the_password_is_redacted_for_logs() -> None:
    assert parse_store_url("postgresql://u:secret@h/db").redacted() == "postgresql://u:***@h/db"


def test_a_settings_db_url_is_kept_as_given_not_turned_into_a_path() -> None:
    assert ServerSettings(db="postgresql://u@127.0.0.1:5432/db").db == \
        "postgresql://u@127.0.0.1:5432/db"


def _serve(tmp_path: Path, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stackroute.server.cli", "serve", "--port", "0", "--db", db,
         "--engine", "stackroute.bench.fixtures.scripted_engine:create"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)


def test_serve_refuses_a_mangled_postgres_url_and_creates_no_sqlite_file(
        tmp_path: Path) -> None:
    done = _serve(tmp_path, "postgresql:/postgres@127.0.0.1:5432/postgres")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "two slashes, then host" in " ".join((done.stdout + done.stderr).split())
    assert list(tmp_path.rglob("*")) == []  # no stray SQLite file at a relative path


def test_serve_with_an_unreachable_postgres_fails_at_start_and_creates_no_file(
        tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    done = _serve(tmp_path, "postgresql://postgres@127.0.0.1:1/postgres")
    assert done.returncode != 0
    assert "cannot open the PostgreSQL store" in " ".join((done.stdout + done.stderr).split())
    assert list(tmp_path.rglob("*")) == []
