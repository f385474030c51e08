"""Issue 28.5 and 28.6: no password of the database URL or of a remote engine's base URL
reaches a client, a log line or stderr. One redaction function (`server/redaction.py`),
tested on every URL form, then on each path a URL travels: the `db` setting's errors, the
PostgreSQL store's open errors (psycopg quotes the URL), the JSON log formatter, and the
remote engine's error text on a real upstream."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from stackroute.server.http.json_logging import JsonFormatter
from stackroute.server.redaction import redact_secrets
from stackroute.server.service.store import StoreUnavailableError
from stackroute.server.service.store_url import StoreUrlError, open_store, parse_store_url
from stackroute.server.settings import ServerSettings, SettingsError

SECRET = "s3cretPW"


@pytest.mark.parametrize(("text", "expected"), [
    ("postgresql://user:s3cretPW@host/db", "postgresql://user:***@host/db"),
    ("postgresql://:s3cretPW@host", "postgresql://:***@host"),
    ("postgresql://:s3cretPW@host:5432/db", "postgresql://:***@host:5432/db"),
    ("postgresql://host/db?password=s3cretPW", "postgresql://host/db?password=***"),
    ("postgresql://host/db?user=u&password=s3cretPW&sslmode=require",
     "postgresql://host/db?user=u&password=***&sslmode=require"),
    ("postgresql://u:s3cret@PW@host/db", "postgresql://u:***@host/db"),
    ("postgresql://u:s3c@ret@PW@host/db?x=1", "postgresql://u:***@host/db?x=1"),
    ("postgres://u:s3cretPW@h/db", "postgres://u:***@h/db"),
    ("postgresql+psycopg://u:s3cretPW@h/db", "postgresql+psycopg://u:***@h/db"),
    ("host=h user=u password=s3cretPW dbname=d", "host=h user=u password=*** dbname=d"),
    ("host=h password='s3cret PW' dbname=d", "host=h password=*** dbname=d"),
    # a remote engine's base URL, as an error quotes it
    ("POST https://svc:s3cretPW@llm.internal/v1/chat/completions: HTTP 500",
     "POST https://svc:***@llm.internal/v1/chat/completions: HTTP 500"),
    ("http://svc:s3cretPW@10.0.0.5:8000", "http://svc:***@10.0.0.5:8000"),
    ("'http://svc:s3cretPW@llm:8000/v1'", "'http://svc:***@llm:8000/v1'"),
    ('{"url": "http://:s3cretPW@llm/v1"}', '{"url": "http://:***@llm/v1"}'),
    ("http://llm/v1?api_key=s3cretPW", "http://llm/v1?api_key=***"),
    # nothing secret: unchanged
    ("postgresql://app@db:5432/stackroute", "postgresql://app@db:5432/stackroute"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("sqlite:////var/lib/s.db", "sqlite:////var/lib/s.db"),
    ("no URL here", "no URL here"),
])
def test_every_url_form_loses_its_password(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected
    assert "s3cret" not in redact_secrets(text)


def test_store_url_redacted_uses_the_one_function() -> None:
    url = parse_store_url("postgresql://:s3cretPW@h/db")
    assert url.redacted() == "postgresql://:***@h/db"


@pytest.mark.parametrize(("db", "words"), [
    ("postgresql:/u:s3cretPW@h/db", "two slashes"),
    ("mysql://u:s3cretPW@h/db", "scheme 'mysql'"),
    ("postgresql://u:s3cret@PW@h/db", "percent-encode it as %40"),
    ("postgresql://u:s3cret PW@h/db", "cannot hold spaces"),
])
def test_store_url_errors_never_quote_the_password(db: str, words: str) -> None:
    with pytest.raises(StoreUrlError, match=words) as caught:
        parse_store_url(db)
    assert "s3cret" not in str(caught.value)
    with pytest.raises(SettingsError) as settings_error:
        ServerSettings.load(db=db)
    assert "s3cret" not in str(settings_error.value)


def test_serve_prints_no_password_on_stderr(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stackroute.server.cli", "serve", "--port", "0",
         "--db", "mysql://admin:s3cretPW@db/x"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert "mysql" in result.stderr
    assert SECRET not in result.stderr + result.stdout


def test_a_psycopg_error_quoting_the_url_is_redacted() -> None:
    """libpq quotes the whole URL when it cannot parse its host; before the fix the store's
    open error (and the traceback's chained psycopg error) carried the password."""
    pytest.importorskip("psycopg")
    with pytest.raises(StoreUnavailableError) as caught:
        open_store("postgresql://u:s3cretPW@[::1/db")
    assert "s3cret" not in str(caught.value)
    assert "postgresql://u:***@" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_log_lines_are_redacted(tmp_path: Path) -> None:
    try:
        raise RuntimeError("cannot reach postgresql://app:s3cretPW@db/x")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("x", logging.ERROR, "f.py", 1, "store %s failed", (
        "postgresql://app:s3cretPW@db/x",), exc_info)
    record.base_url = "http://svc:s3cretPW@llm/v1"
    line = JsonFormatter().format(record)
    assert "s3cret" not in line
    assert "postgresql://app:***@db/x" in line and "http://svc:***@llm/v1" in line


# -- 28.5: a remote engine's upstream credentials ----------------------------------------
def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://svc:{SECRET}@", 1)


@pytest.mark.parametrize("status", [400, 500, 503])
def test_remote_engine_errors_never_carry_the_base_urls_password(status: int) -> None:
    from live_server import serve
    from stackroute.runtime.messages import Message
    from stackroute.runtime.prompt import Prompt
    from stackroute.server.engines.remote_engine import RemoteEngine
    from stackroute.server.engines.remote_errors import RemoteEngineError
    from upstream_kit import FAST_RETRY, Script, fake_server

    chat = Script((status, {"error": {"message": "upstream says no"}}, {}))
    with serve(fake_server(chat)) as url, \
            RemoteEngine(base_url=_with_credentials(url), options=FAST_RETRY) as remote, \
            pytest.raises(RemoteEngineError) as caught:
        remote.choose(Prompt((Message("user", "Pick a or b."),)), ("a", "b"))
    assert SECRET not in str(caught.value)
    assert "svc:***@127.0.0.1" in str(caught.value)


def test_an_unreachable_upstream_with_credentials_is_redacted() -> None:
    import socket

    from stackroute.server.engines.remote_engine import RemoteEngine, RemoteOptions
    from stackroute.server.engines.remote_errors import RemoteUnavailableError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RemoteUnavailableError) as caught:
        RemoteEngine(base_url=f"http://svc:{SECRET}@127.0.0.1:{port}/v1",
                     options=RemoteOptions(backoff_s=0.01, max_retries=1))
    assert SECRET not in str(caught.value)


def test_api_clients_and_logs_never_see_the_upstream_password(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The reproduction: a chat completion through a server whose remote engine's upstream
    fails answered `502 … https://svc:Upstr3amT0ken@llm.internal…`."""
    import httpx
    from live_server import serve, server_settings
    from stackroute.server.engines.remote_engine import RemoteEngine
    from stackroute.server.http.app import create_app
    from upstream_kit import FAST_RETRY, Script, fake_server

    chat = Script((500, {"error": {"message": "upstream exploded"}}, {}))
    with serve(fake_server(chat)) as url, \
            RemoteEngine(base_url=_with_credentials(url), options=FAST_RETRY) as remote, \
            serve(create_app(server_settings(tmp_path), engine=remote)) as base, \
            caplog.at_level(logging.INFO):
        response = httpx.post(f"{base}/v1/chat/completions", timeout=30, json={
            "model": "fake", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 502, response.text
    assert "upstream exploded" in response.text
    assert SECRET not in response.text
    lines = [JsonFormatter().format(r) for r in caplog.records]
    assert any("upstream exploded" in line for line in lines)
    assert not [line for line in lines if SECRET in line]  # every line leaves formatted
