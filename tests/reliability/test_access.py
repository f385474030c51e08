"""Access: the API key is compared in constant time and never logged; catalogs cannot name
handlers outside the operator's allowlist (the app in-process, a scripted engine)."""

from __future__ import annotations

import ast
import inspect
import logging
from pathlib import Path
from typing import Any

import pytest
from reliability_kit import error_of, fast_client
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.handlers import HandlerTable
from stackroute.server.http import auth
from stackroute.server.http.json_logging import JsonFormatter

SECRET = "sk-live-7f3a9c1e5b2d4f60-secret"
WRONG = "sk-live-7f3a9c1e5b2d4f60-secreT"  # same length, one byte off at the end
HANDLERS = "stackroute.bench.reliability.crash_handlers"


def catalog_with_handler(handler: str) -> dict[str, Any]:
    return {"name": "ops", "description": "operations", "children": [
        {"name": "tools", "description": "tools", "children": [
            {"name": "run", "description": "runs something", "handler": handler,
             "parameters": {"type": "object", "properties": {"ref": {"type": "string"}}}}]}]}


def test_the_key_is_compared_only_with_hmac_compare_digest() -> None:
    """No `==` or `in` touches the key: the one comparison is `hmac.compare_digest` (whose time
    does not depend on where the first differing byte is)."""
    tree = ast.parse(inspect.getsource(auth))
    compares = [node for node in ast.walk(tree) if isinstance(node, ast.Compare)]
    assert not [ast.unparse(c) for c in compares
                if "_expected" in ast.unparse(c) or "given" in ast.unparse(c)]
    calls = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call)
             and ast.unparse(n.func) == "hmac.compare_digest"]
    assert calls == ["hmac.compare_digest(given, self._expected)"]  # one check, both paths


@pytest.mark.parametrize(("header", "reason"), [
    (None, "missing API key"),
    ("Bearer ", "missing API key"),
    (f"Bearer {WRONG}", "invalid API key"),
    (f"Bearer {SECRET[:-1]}", "invalid API key"),  # a prefix
    (f"Bearer {SECRET}x", "invalid API key"),  # an extension
    (f"Basic {SECRET}", "missing API key"),  # not a bearer token
    ("Bearer s\u00e9cr\u00e8t", "invalid API key"),  # non-ASCII (sent as latin-1 bytes)
])
def test_wrong_keys_are_401_and_the_right_one_passes(tmp_path: Path, header: str | None,
                                                       reason: str) -> None:
    with fast_client(tmp_path, api_key=SECRET) as client:
        headers = {} if header is None else {"authorization": header.encode("latin-1")}
        r = client.get("/v1/catalogs", headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert reason in error_of(r)["message"]
        ok = client.get("/v1/catalogs", headers={"authorization": f"Bearer {SECRET}"})
        assert ok.status_code == 200
        assert client.get("/healthz").status_code == 200  # probes stay open


def test_keys_never_reach_the_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every record of a session with a wrong key, the right key, a key in the query string
    and a failing request, formatted as the server writes it (JSON, with extras): no key."""
    caplog.set_level(logging.DEBUG)
    with fast_client(tmp_path, api_key=SECRET, log_level="debug") as client:
        wrong = {"authorization": f"Bearer {WRONG}"}
        right = {"authorization": f"Bearer {SECRET}"}
        assert client.get("/v1/catalogs", headers=wrong).status_code == 401
        assert client.post("/v1/catalogs", headers=wrong, json={}).status_code == 401
        assert client.get(f"/v1/catalogs?api_key={SECRET}", headers=right).status_code == 200
        assert client.post("/v1/catalogs", headers=right,
                           json=catalog_with_handler("os:system")).status_code == 422
        assert client.post("/v1/sessions", headers=right,
                           json={"catalog": "nope", "task": SECRET}).status_code == 404
        assert client.get("/v1/sessions/x/trace", headers=right).status_code == 404
    formatter = JsonFormatter()
    server_records = [r for r in caplog.records if not r.name.startswith("httpx")]  # client's
    lines = [formatter.format(record) for record in server_records]
    assert any('"status": 401' in line for line in lines)  # the access log did run
    leaked = [line for line in lines if SECRET in line or WRONG in line]
    assert leaked == []


def test_settings_hide_the_key() -> None:
    from stackroute.server.settings import ServerSettings

    settings = ServerSettings(api_key=SECRET)
    assert SECRET not in repr(settings) and SECRET not in str(settings)
    assert SECRET not in settings.model_dump_json()


@pytest.mark.parametrize("handler", [
    "os:system",
    "subprocess:run",
    "stackroute.bench:crash_handlers",  # the parent package is not allowed
    f"{HANDLERS}x:send_wire",  # a name that merely starts like an allowed module
])
def test_a_catalog_naming_a_handler_outside_the_allowlist_is_refused(
        tmp_path: Path, handler: str) -> None:
    module = handler.partition(":")[0]
    with fast_client(tmp_path, allowed_handler_modules=[HANDLERS]) as client:
        r = client.post("/v1/catalogs", json=catalog_with_handler(handler))
        assert r.status_code == 422, r.text
        error = error_of(r)
        assert module in error["message"] and "outside the allowed modules" in error["message"]
        assert error["problems"][0]["path"] == "tools/run"
        assert client.get("/v1/catalogs").json()["catalogs"] == []  # nothing was stored


def test_with_no_allowlist_no_handler_is_accepted(tmp_path: Path) -> None:
    with fast_client(tmp_path) as client:
        r = client.post("/v1/catalogs", json=catalog_with_handler(f"{HANDLERS}:send_wire"))
        assert r.status_code == 422
        assert "none configured" in error_of(r)["message"]


@pytest.mark.parametrize(("handler", "expected"), [
    (f"{HANDLERS}.missing:run", "outside the allowed modules"),  # exact: no submodules
    (f"{HANDLERS}:no_such_function", "no callable"),
    (f"{HANDLERS}:os", "no callable"),  # a module the allowed module imported
    (f"{HANDLERS}:LOG_ENV", "no callable"),
])
def test_an_allowed_module_must_hold_the_handler(tmp_path: Path, handler: str,
                                                 expected: str) -> None:
    with fast_client(tmp_path, allowed_handler_modules=[HANDLERS]) as client:
        r = client.post("/v1/catalogs", json=catalog_with_handler(handler))
        assert r.status_code == 422 and expected in error_of(r)["message"]


def test_an_allowed_handler_is_accepted(tmp_path: Path) -> None:
    with fast_client(tmp_path, allowed_handler_modules=[HANDLERS]) as client:
        r = client.post("/v1/catalogs", json=catalog_with_handler(f"{HANDLERS}:send_wire"))
        assert r.status_code == 201, r.text


def test_a_callable_an_allowed_module_imported_from_elsewhere_is_refused() -> None:
    """`from os import system` in an allowed module must not make `os.system` a handler: the
    function itself must come from an allowed module."""
    table = HandlerTable(allowed_modules=["json"])
    tree = build_tree({"name": "r", "children": [
        {"name": "a", "handler": "json:loads"},  # defined in json: fine
        {"name": "b", "handler": "json:JSONDecodeError"},  # defined in json.decoder: fine
        {"name": "c", "handler": "json:scanner"},  # a module: not callable
        {"name": "d", "handler": "json:codecs"},
    ]})
    problems = {p.path: p.message for p in table.problems(tree)}
    assert set(problems) == {"c", "d"}
    smuggled = HandlerTable(allowed_modules=["logging"])  # logging does `import os`...
    tree = build_tree({"name": "r", "children": [
        {"name": "e", "handler": "logging:getLogger"},
        {"name": "f", "handler": "http.server:copy"},  # outside: refused by module name
    ]})
    assert {p.path for p in smuggled.problems(tree)} == {"f"}
    reexported = HandlerTable(allowed_modules=["shlex"])  # shlex does `from io import StringIO`
    tree = build_tree({"name": "r", "children": [{"name": "g", "handler": "shlex:StringIO"}]})
    [problem] = reexported.problems(tree)
    assert "defined in" in problem.message and "_io" in problem.message
