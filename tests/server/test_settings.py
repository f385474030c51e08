"""Server settings and the `serve` command's start-up checks (no model, no server)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from stackroute.server.cli import app as cli_app
from stackroute.server.settings import ServerSettings, SettingsError, is_loopback
from typer.testing import CliRunner


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STACKROUTE_CONFIG", "STACKROUTE_PORT", "STACKROUTE_MAX_QUEUE",
                 "STACKROUTE_API_KEY", "STACKROUTE_HOST", "STACKROUTE_CATALOGS"):
        monkeypatch.delenv(name, raising=False)


def test_defaults_are_the_embedded_engine_on_loopback() -> None:
    settings = ServerSettings.load()
    assert (settings.engine, settings.host, settings.port) == ("transformers", "127.0.0.1", 8000)
    assert settings.api_key is None and Path(settings.db) == Path("stackroute.db")


def test_flags_override_env_override_file(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "stackroute.yaml"
    config.write_text("port: 9000\nmax_queue: 3\nmax_concurrency: 2\ncatalogs: [a.yaml]\n"
                      "db: state/db.sqlite\n")
    monkeypatch.setenv("STACKROUTE_MAX_QUEUE", "5")
    monkeypatch.setenv("STACKROUTE_PORT", "9100")
    settings = ServerSettings.load(config=config, port=9200)
    assert settings.port == 9200  # flag
    assert settings.max_queue == 5  # environment
    assert settings.max_concurrency == 2  # file
    assert settings.catalogs == [tmp_path / "a.yaml"]  # relative to the file
    assert Path(settings.db) == tmp_path / "state" / "db.sqlite"


def test_config_file_from_the_environment_and_json(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"max_body_bytes": 4096, "log_level": "DEBUG"}))
    monkeypatch.setenv("STACKROUTE_CONFIG", str(config))
    settings = ServerSettings.load()
    assert settings.max_body_bytes == 4096 and settings.log_level.value == "debug"


@pytest.mark.parametrize(("content", "expected"), [
    ('{"bogus": 1}', "bogus: unknown setting"),
    ('{"port": "eighty"}', "port: Input should be a valid integer, unable to parse string as "
                           "an integer; got 'eighty'"),
    ('{"optional_values": "sometimes"}', "optional_values: Input should be 'words' or "
                                         "'meaning'; got 'sometimes'"),
    ('{"engine": "nope"}', "unknown engine 'nope'; known engines: remote, transformers, vllm"),
    ("[1, 2]", "must hold a mapping"),
    ("{not json", "is not valid"),
])
def test_bad_config_files_are_clear_errors(tmp_path: Path, content: str, expected: str) -> None:
    config = tmp_path / "settings.json"
    config.write_text(content)
    with pytest.raises(SettingsError, match=re.escape(expected)):
        ServerSettings.load(config=config)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read config file"):
        ServerSettings.load(config=tmp_path / "absent.yaml")


def test_public_bind_needs_a_key_or_an_explicit_opt_in() -> None:
    refusal = re.escape("refusing to bind to '0.0.0.0' without an API key")
    with pytest.raises(SettingsError, match=refusal):
        ServerSettings.load(host="0.0.0.0")
    assert ServerSettings.load(host="0.0.0.0", api_key="k").host == "0.0.0.0"
    assert ServerSettings.load(host="0.0.0.0", allow_public_bind=True).api_key is None
    assert "s3cret" not in repr(ServerSettings.load(api_key="s3cret"))  # SecretStr: hidden


@pytest.mark.parametrize(("host", "expected"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.1", False),
    ("example.com", False),
])
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


def test_settings_are_frozen() -> None:
    settings = ServerSettings.load()
    with pytest.raises(ValueError, match="frozen"):
        settings.port = 1  # type: ignore[misc]


def test_serve_refuses_a_public_bind_without_a_key() -> None:
    result = CliRunner().invoke(cli_app, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "refusing to bind" in result.output


def test_serve_rejects_unknown_config_keys(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("prot: 80\n")
    result = CliRunner().invoke(cli_app, ["serve", "--config", str(config)])
    assert result.exit_code == 2 and "prot: unknown setting" in result.output


def test_session_options_come_from_the_settings_with_their_defaults(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13: no second set of fallbacks. The service's options are the settings' values,
    and max_session_workers / max_active_sessions are real settings (the environment too)."""
    from stackroute.server.service.session_options import SessionOptions

    monkeypatch.setenv("STACKROUTE_MAX_ACTIVE_SESSIONS", "7")
    settings = ServerSettings(max_session_workers=3, allowed_handler_modules=["acme.tools"])
    options = SessionOptions.from_settings(settings)
    assert (options.max_workers, options.max_active) == (3, 7)
    assert options.leaf_isolation == settings.leaf_isolation == "process"
    assert options.leaf_timeout_s == settings.leaf_timeout_s
    assert options.max_session_steps == settings.max_session_steps
    assert options.allowed_handler_modules == ("acme.tools",)
    assert options.max_menu_options == settings.max_menu_options
    assert options.max_leaf_memory_bytes == settings.max_leaf_memory_mb << 20  # type: ignore[operator]
    assert options.is_auto_approve_allowed is True  # no API key
    assert SessionOptions.from_settings(ServerSettings(api_key="k")).is_auto_approve_allowed \
        is False


def test_the_embedded_engine_gets_its_decoding_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import stackroute.server.http.app as app_module
    from stackroute.server.http.app import build_engine

    seen: dict[str, Any] = {}
    monkeypatch.setattr(app_module, "create_engine",
                        lambda name, **kwargs: seen.update(name=name, **kwargs))
    build_engine(ServerSettings(max_draft_tokens=0, max_string_chars=32, dtype="bfloat16"))
    assert seen == {"name": "transformers", "model": None, "base_url": None,
                    "dtype": "bfloat16", "max_draft_tokens": 0, "max_string_chars": 32}
    with pytest.raises(ValueError, match="max_draft_tokens"):
        ServerSettings(max_draft_tokens=-1)
