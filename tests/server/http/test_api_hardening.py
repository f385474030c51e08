"""Issue 15's holes in the routing API, each reproduced on the minimal routing app with a
scripted engine (`PlanEngine`): the reproduction is the test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from doubles import PlanEngine
from fastapi.testclient import TestClient
from routing_app_kit import assert_error, make_app, make_settings, upload
from session_kit import BANK_CATALOG
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import PrepareStats
from stackroute.server.engines.remote_errors import RemoteUnavailableError


class OutageEngine(PlanEngine):
    """A remote engine whose upstream is down when a catalog is compiled."""

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        raise RemoteUnavailableError("connection refused after 4 attempt(s)")


def test_an_upstream_outage_at_upload_keeps_its_status(tmp_path: Path) -> None:
    """Issue 13: an engine failure during `prepare` is no 422 (the catalog is fine)."""
    with TestClient(make_app(make_settings(tmp_path), OutageEngine())) as client:
        response = client.post("/v1/catalogs", json=BANK_CATALOG)
    assert_error(response, 502, "remote_unavailable")
    assert "connection refused" in response.json()["error"]["message"]


# -- 11: a malformed client state is a 400 naming the field -----------------------------------
def _state(client: TestClient, catalog_id: str) -> dict[str, Any]:
    first = client.post("/v1/route", json={"catalog": catalog_id, "query": "Send 5 to Asha",
                                           "include_state": True})
    assert first.status_code == 200, first.text
    state: dict[str, Any] = first.json()["state"]
    return state


DEEP = "@deep@"  # replaced in the body's text: json.dumps itself cannot write 900 levels


@pytest.mark.parametrize(("change", "param"), [
    (lambda s: s["stack"][0].update(turns=7), "state.stack.0.turns"),
    (lambda s: s["stack"][0].update(node_path=["a"]), "state.stack.0.node_path"),
    (lambda s: s.update(conversation=[{"role": "user", "content": {"x": 1}}]),
     "state.conversation.0.content"),
    (lambda s: s["stack"][-1].update(parent_id=99), "state.stack.1.parent_id"),
    (lambda s: s.update(limits={"max_steps": "many"}), "state.limits.max_steps"),
    (lambda s: s.update(usage={"model_calls": [1]}), "state.usage.model_calls"),
    (lambda s: s["stack"][0]["accumulator"].append({"deep": DEEP}), "state"),
    (lambda s: s.update(trace=[{"seq": "x"}]), "state"),
    (lambda s: s["stack"][-1].update(refused=[{"leaf": "payments/send_money",
                                               "arguments": [], "properties": []}]),
     "state.stack.1.refused.0.arguments"),
])
def test_a_malformed_state_is_400_naming_the_field(client: TestClient, change: Any,
                                                    param: str) -> None:
    catalog_id = upload(client)
    state = _state(client, catalog_id)
    change(state)
    body = json.dumps({"catalog": catalog_id, "state": state}).replace(
        json.dumps(DEEP), "[" * 900 + "1" + "]" * 900)
    response = client.post("/v1/route", content=body,
                           headers={"content-type": "application/json"})
    error = assert_error(response, 400, "invalid_input")
    assert error.get("param") == param, error


def test_a_state_with_refused_arguments_is_continued(client: TestClient) -> None:
    """What a leaf's schema refused in a frame travels with the state (the router keeps
    from repeating that call)."""
    catalog_id = upload(client)
    state = _state(client, catalog_id)
    state["stack"][-1]["refused"] = [{"leaf": "payments/send_money",
                                      "arguments": {"payee": "Asha", "amount": "5"},
                                      "properties": ["amount"]}]
    response = client.post("/v1/route", json={"catalog": catalog_id, "state": state,
                                              "include_state": True})
    assert response.status_code == 200, response.text
    assert response.json()["state"]["stack"][-1]["refused"] == state["stack"][-1]["refused"]


@pytest.fixture
def client(tmp_path: Path) -> Any:
    with TestClient(make_app(make_settings(tmp_path), PlanEngine())) as c:
        yield c


# -- 3: YAML aliases multiplied validation cost ------------------------------------------------
def test_an_aliased_yaml_catalog_is_refused_before_it_is_built(client: TestClient) -> None:
    """The reproduction: one big schema under an anchor, aliased by 8 leaves (9.7 s before
    its 422); now refused by the parser, in well under a second."""
    import time

    properties = "\n".join(f"            p{i}: {{type: string, pattern: '^[a-z]{{1,40}}$'}}"
                           for i in range(2000))
    leaves = "\n".join(f"      - name: leaf{i}\n        parameters: *big" for i in range(8))
    text = (f"name: r\nchildren:\n  - name: g\n    children:\n      - name: first\n"
            f"        parameters: &big\n          type: object\n          properties:\n"
            f"{properties}\n{leaves}\n")
    started = time.perf_counter()
    response = client.post("/v1/catalogs", content=text,
                           headers={"content-type": "application/yaml"})
    assert time.perf_counter() - started < 2.0
    error = assert_error(response, 422, "invalid_catalog")
    assert "anchors and aliases" in error["message"]


# -- 2: a handler module's import cannot take the server down ---------------------------------
def _catalog_with_handler(ref: str) -> dict[str, Any]:
    catalog = json.loads(json.dumps(BANK_CATALOG))
    catalog["children"][0]["children"][0]["handler"] = ref
    return catalog


def test_a_handler_import_that_exits_is_a_422_naming_the_leaf(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, allowed_handler_modules=["upload_exits"])
    with TestClient(make_app(settings, PlanEngine())) as client:
        response = client.post("/v1/catalogs", json=_catalog_with_handler("upload_exits:send"))
        error = assert_error(response, 422, "invalid_catalog")
        assert error["problems"][0]["path"] == "payments/send_money"
        assert "SystemExit" in error["problems"][0]["message"]
        assert client.get("/healthz").status_code in (200, 404)  # still serving


def test_a_stored_catalog_whose_handler_exits_is_skipped_at_start(tmp_path: Path) -> None:
    from stackroute.server.service.store import CatalogRecord, SessionStore

    store = SessionStore(tmp_path / "stackroute.db")
    store.put_catalog(CatalogRecord(id="bank-1", name="Bank Tools", format="json",
                                    source=json.dumps(_catalog_with_handler("upload_exits:send")),
                                    created_unix=0.0))
    store.close()
    settings = make_settings(tmp_path, allowed_handler_modules=["upload_exits"])
    with TestClient(make_app(settings, PlanEngine())) as client:
        assert client.get("/v1/catalogs").json()["catalogs"] == []


# -- 6: metrics label cardinality ---------------------------------------------------------------
def test_unknown_methods_and_paths_share_one_metrics_label(tmp_path: Path) -> None:
    """The reproduction: 50 requests with random 6 KB methods grew /metrics from 0.59 MB to
    6.38 MB. Unknown methods are counted as `other`; unmatched paths as `<unmatched>`."""
    import secrets

    from stackroute.server.http.app import create_app

    app = create_app(make_settings(tmp_path), engine=PlanEngine())
    with TestClient(app, base_url="http://127.0.0.1") as client:
        before = len(client.get("/metrics").content)
        for _ in range(50):
            client.request(secrets.token_hex(3000).upper(), f"/x/{secrets.token_hex(8)}")
        text = client.get("/metrics").text
    assert len(text) < before + 4000
    assert 'method="other"' in text and 'route="<unmatched>"' in text


# -- 9: sessions obey the same menu and prompt limits as /v1/route -----------------------------
def test_a_session_over_the_menu_limit_is_refused(tmp_path: Path) -> None:
    with TestClient(make_app(make_settings(tmp_path, max_menu_options=2), PlanEngine())) as c:
        catalog_id = upload(c)
        response = c.post("/v1/sessions", json={"catalog": catalog_id, "task": "Send 5"})
        error = assert_error(response, 422, "routing_limit")
        assert "the limit is 2" in error["message"]
        assert c.get("/v1/sessions").json()["sessions"] == []


def test_a_session_whose_prompt_outgrows_the_limit_ends_with_the_limit(tmp_path: Path) -> None:
    from routing_app_kit import wait_status

    # PlanEngine counts words: the root prompt (111 with the menu-first order) fits in 130,
    # the payments menu's (162) does not.
    settings = make_settings(tmp_path, max_prompt_tokens=130)
    with TestClient(make_app(settings, PlanEngine(plan=["payments", "balance"]))) as c:
        catalog_id = upload(c)
        created = c.post("/v1/sessions", json={"catalog": catalog_id, "task": "My balance?"})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        assert wait_status(c, sid) == "error"
        session = c.get(f"/v1/sessions/{sid}").json()
        assert "the routing prompt has" in session["error"] and "limit is 130" in session["error"]
        assert session["num_steps"] == 1  # the root call ran; the over-long one never did


# -- 13: auto_approve is the operator's to allow -----------------------------------------------
@pytest.mark.parametrize(("overrides", "status"), [
    ({"api_key": "k"}, 403),  # with a key, forbidden unless allowed
    ({"api_key": "k", "allow_auto_approve": True}, 201),
    ({}, 201),  # no key: a local single-user server
    ({"allow_auto_approve": False}, 403),
])
def test_auto_approve_needs_the_operators_consent(tmp_path: Path, overrides: dict[str, Any],
                                                  status: int) -> None:
    with TestClient(make_app(make_settings(tmp_path, **overrides), PlanEngine())) as c:
        catalog_id = upload(c)
        response = c.post("/v1/sessions", json={"catalog": catalog_id, "task": "Send 5",
                                                "auto_approve": True})
        assert response.status_code == status, response.text
        if status == 403:
            assert response.json()["error"]["code"] == "auto_approve_forbidden"


# -- 10: catalog ids are full content hashes, checked on a match -------------------------------
def test_catalog_ids_carry_the_full_hash_and_a_colliding_upload_is_refused(
        tmp_path: Path) -> None:
    from stackroute.server.service.catalog_registry import CatalogRegistry
    from stackroute.server.service.store import CatalogRecord, SessionStore

    probe = CatalogRegistry(SessionStore(), PlanEngine())
    catalog_id = probe.add_text(json.dumps(BANK_CATALOG))[0].id
    assert len(catalog_id.rsplit("-", 1)[1]) == 64

    # An operator's other catalog already stored under that id (a hash collision, as the
    # 48-bit ids allowed): the upload must not be answered with it, nor replace it.
    other = json.loads(json.dumps(BANK_CATALOG))
    other["children"][1]["description"] = "Sensitive: the operator's own."
    store = SessionStore(tmp_path / "s.db")
    store.put_catalog(CatalogRecord(id=catalog_id, name="Bank Tools", source=json.dumps(other),
                                    format="json", created_unix=0.0))
    registry = CatalogRegistry(store, PlanEngine())
    assert registry.load_persisted() == []
    from stackroute.runtime.errors import StateError

    with pytest.raises(StateError, match="another catalog"):
        registry.add_text(json.dumps(BANK_CATALOG))
    assert registry.get(catalog_id).tree.node("weather").description.startswith("Sensitive")
    store.close()


# -- 12 (the executor part): leaf worker processes run under a memory limit -----------------
def test_process_isolated_leaves_get_the_settings_memory_limit(tmp_path: Path) -> None:
    from stackroute.runtime.handlers import HandlerTable
    from stackroute.runtime.process_executor import ProcessExecutor
    from stackroute.server.service.leaf_executors import leaf_executor
    from stackroute.server.service.session_options import SessionOptions

    settings = make_settings(tmp_path, leaf_isolation="process", max_leaf_memory_mb=256)
    executor = leaf_executor(HandlerTable(), SessionOptions.from_settings(settings))
    try:
        assert isinstance(executor, ProcessExecutor)
        assert executor.memory_limit_bytes == 256 << 20
    finally:
        executor.close()


# -- 12: a client's constraint past the grammar budget is a 422 naming the construct ----------
@pytest.mark.parametrize(("structured", "param", "words"), [
    ({"regex": "a{1,100000}"}, "structured_outputs.regex", "states"),
    ({"json": {"type": "object", "properties": {"s": {"type": "string",
                                                      "maxLength": 10_000_000}}}},
     "structured_outputs.json", "maxLength"),
])
def test_a_constraint_past_the_budget_is_refused(tmp_path: Path, structured: dict[str, Any],
                                                 param: str, words: str) -> None:
    from doubles import RecordingEngine
    from stackroute.server.http.app import create_app

    with TestClient(create_app(make_settings(tmp_path), engine=RecordingEngine()),
                    base_url="http://127.0.0.1") as client:
        response = client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "x"}], "structured_outputs": structured})
    error = assert_error(response, 422, "constraint_too_large")
    assert error["param"] == param and words in error["message"]


# -- 1: an approval is for one call, in one session --------------------------------------------
def test_an_approval_digest_cannot_be_replayed_on_another_session(client: TestClient) -> None:
    from routing_app_kit import wait_status

    catalog_id = upload(client)
    first, second = (client.post("/v1/sessions", json={"catalog": catalog_id,
                                                       "task": "Send 5 to Asha"}).json()["id"]
                     for _ in range(2))
    assert wait_status(client, first) == wait_status(client, second) == "paused"
    shown = [client.get(f"/v1/sessions/{s}").json()["pending"] for s in (first, second)]
    assert shown[0]["arguments"] == shown[1]["arguments"]  # the same payment, twice
    assert client.post(f"/v1/sessions/{first}/approve",
                       json={"digest": shown[0]["digest"]}).status_code == 200
    replay = client.post(f"/v1/sessions/{second}/approve", json={"digest": shown[0]["digest"]})
    error = assert_error(replay, 409, "invalid_state")
    assert shown[1]["digest"] not in error["message"]
    assert client.get(f"/v1/sessions/{second}").json()["status"] == "paused"
