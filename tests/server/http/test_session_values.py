"""A session whose leaf call lacks a required value ("Send money to Asha": no amount) pauses
and asks for it over HTTP: the view names `missing_values` with their `values_schema`,
`POST /v1/sessions/{id}/values` takes the user's answer (a wrong one is a 4xx naming what
was expected and changes nothing), and the call then waits at its gate under a new digest
(send_money is sensitive) until approved; its record names the `supplied_values`.

Once with a scripted engine on the minimal app (every refusal, no model), once with the real
embedded model and the real app on uvicorn on loopback (tier c)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from doubles import PlanEngine
from fastapi.testclient import TestClient
from live_server import serve, server_settings
from routing_app_kit import make_app, make_settings, upload, wait_status

REPO = Path(__file__).resolve().parents[3]
TASK = "Send money to Asha"
ASKED = {"type": "object", "properties": {"amount": {"type": "number"}},
         "required": ["amount"], "additionalProperties": False}
REAL_WAIT_S = 600.0  # the 135M model on a couple of shared CPU cores

Post = Callable[..., Any]  # TestClient.post or httpx.Client.post


def check_refusals(post: Post, get: Callable[[str], Any], sid: str) -> dict[str, Any]:
    """Every wrong answer is refused with what was expected and what arrived, and leaves the
    session exactly as it was; returns the (unchanged) view."""
    before = get(f"/v1/sessions/{sid}").json()
    digest = before["pending"]["digest"]
    wrong: list[tuple[Any, int, str]] = [
        ({"amount": "five hundred"}, 400, "do not fit its schema"),
        ({"amount": 500, "payee": "Ravi"}, 400, "waits only for amount; got payee"),
        ({}, 400, "still needs amount"),
        ([500], 422, "expected a JSON object naming each missing value, got an array"),
        (None, 422, "got null"),
        ("500", 422, "got a string"),
    ]
    for values, status, words in wrong:
        r = post(f"/v1/sessions/{sid}/values", json={"digest": digest, "values": values})
        assert r.status_code == status, (values, r.text)
        assert words in r.json()["error"]["message"], (values, r.text)
    r = post(f"/v1/sessions/{sid}/values", json={"digest": digest})
    assert r.status_code == 422 and "values" in r.json()["error"]["message"], r.text
    r = post(f"/v1/sessions/{sid}/values", json={"digest": "0" * 32, "values": {"amount": 5}})
    assert r.status_code == 409 and r.json()["error"]["code"] == "invalid_state", r.text
    r = post(f"/v1/sessions/{sid}/approve", json={"digest": digest})  # values first
    assert r.status_code == 409 and "amount" in r.json()["error"]["message"], r.text
    after: dict[str, Any] = get(f"/v1/sessions/{sid}").json()
    assert after["status"] == "paused" and after["pending"] == before["pending"]
    assert len(after["trace"]) == len(before["trace"])
    return after


def check_answered(post: Post, get: Callable[[str], Any], sid: str,
                   wait: Callable[[str], str]) -> dict[str, Any]:
    """The right values move the call to its gate under a new digest; approving runs it.
    Returns the finished view."""
    waiting = get(f"/v1/sessions/{sid}").json()["pending"]
    r = post(f"/v1/sessions/{sid}/values",
             json={"digest": waiting["digest"], "values": {"amount": 500}})
    assert r.status_code == 200, r.text
    assert wait(sid) == "paused"
    gated = get(f"/v1/sessions/{sid}").json()
    pending = gated["pending"]
    assert pending["path"] == "payments/send_money" and pending["is_gated"] is True
    assert pending["arguments"]["amount"] == 500
    assert pending["missing_values"] == [] and pending["values_schema"] is None
    assert pending["supplied_values"] == ["amount"]
    assert pending["digest"] != waiting["digest"]
    supplied = [e for e in gated["trace"] if e["kind"] == "values_supply"]
    assert [e["detail"]["digest"] for e in supplied] == [pending["digest"]]
    assert gated["trace"][-1]["kind"] == "gate_pause"
    r = post(f"/v1/sessions/{sid}/approve", json={"digest": pending["digest"]})
    assert r.status_code == 200, r.text
    assert wait(sid) == "done"
    done: dict[str, Any] = get(f"/v1/sessions/{sid}").json()
    call = done["calls"][0]
    assert call["path"] == "payments/send_money" and call["arguments"]["amount"] == 500
    assert call["supplied_values"] == ["amount"]
    return done


def test_a_session_asks_for_the_missing_amount_over_http(tmp_path: Path) -> None:
    engine = PlanEngine(arguments={"send_money": {"payee": "Asha"}})
    with TestClient(make_app(make_settings(tmp_path), engine)) as client:
        catalog_id = upload(client)
        r = client.post("/v1/sessions", json={"catalog": catalog_id, "task": TASK})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        assert wait_status(client, sid) == "paused"
        view = client.get(f"/v1/sessions/{sid}").json()
        pending = view["pending"]
        assert pending["path"] == "payments/send_money"
        assert pending["missing_values"] == ["amount"] and pending["values_schema"] == ASKED
        assert pending["supplied_values"] == [] and "amount" not in pending["arguments"]
        assert view["trace"][-1]["kind"] == "values_pause"

        check_refusals(client.post, client.get, sid)
        # its state reads back as a run state (a routing call from it is refused: it waits)
        state = client.get(f"/v1/sessions/{sid}?include_state=true").json()["state"]
        assert state["pending"]["missing_values"] == ["amount"]
        r = client.post("/v1/route", json={"catalog": catalog_id, "state": state})
        assert r.status_code == 409 and "pending call" in r.json()["error"]["message"], r.text
        check_answered(client.post, client.get, sid, lambda s: wait_status(client, s))


def test_a_routing_call_names_the_values_its_leaf_decision_left_out(tmp_path: Path) -> None:
    engine = PlanEngine(arguments={"send_money": {"payee": "Asha"}})
    with TestClient(make_app(make_settings(tmp_path), engine)) as client:
        r = client.post("/v1/route", json={"catalog": upload(client), "query": TASK,
                                           "node": "payments"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["decision"], out["arguments"]) == ("send_money", {"payee": "Asha"})
    assert out["missing_values"] == ["amount"]  # (the scripted engine writes the payee)


def test_reject_declines_a_call_waiting_for_values(tmp_path: Path) -> None:
    engine = PlanEngine(arguments={"send_money": {"payee": "Asha"}})
    with TestClient(make_app(make_settings(tmp_path), engine)) as client:
        sid = client.post("/v1/sessions", json={"catalog": upload(client),
                                                "task": TASK}).json()["id"]
        assert wait_status(client, sid) == "paused"
        digest = client.get(f"/v1/sessions/{sid}").json()["pending"]["digest"]
        r = client.post(f"/v1/sessions/{sid}/reject", json={"digest": digest})
        assert r.status_code == 200, r.text
        assert wait_status(client, sid) == "done"
        assert client.get(f"/v1/sessions/{sid}").json()["calls"] == []
        r = client.post(f"/v1/sessions/{sid}/values",
                        json={"digest": digest, "values": {"amount": 5}})
        assert r.status_code == 409, r.text  # nothing waits any more


def test_the_endpoint_is_in_the_openapi_schema(tmp_path: Path) -> None:
    with TestClient(make_app(make_settings(tmp_path), PlanEngine())) as client:
        spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/v1/sessions/{session_id}/values"]["post"]
    assert {"200", "400", "404", "409", "422"} <= set(operation["responses"])
    body = spec["components"]["schemas"]["ValuesRequest"]
    assert set(body["required"]) == {"digest", "values"}
    pending = spec["components"]["schemas"]["PendingCallModel"]["properties"]
    assert {"missing_values", "supplied_values", "values_schema"} <= set(pending)


@pytest.mark.model
def test_the_real_model_asks_for_the_amount_over_http(tmp_path: Path,
                                                      embedded_model: Any) -> None:
    from stackroute.server.engines.transformers_engine import TransformersEngine
    from stackroute.server.http.app import create_app

    engine = TransformersEngine(loaded=embedded_model)
    catalog = json.loads((REPO / "examples/bank.catalog.json").read_text(encoding="utf-8"))
    settings = server_settings(tmp_path, leaf_isolation="thread")
    with serve(create_app(settings, engine=engine)) as base_url, \
            httpx.Client(base_url=base_url, timeout=REAL_WAIT_S) as client:
        r = client.post("/v1/catalogs", json=catalog)
        assert r.status_code == 201, r.text
        r = client.post("/v1/sessions", json={"catalog": r.json()["id"], "task": TASK})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]

        def wait(session_id: str) -> str:
            return wait_status(client, session_id, timeout_s=REAL_WAIT_S, poll_s=0.1)

        assert wait(sid) == "paused"
        view = client.get(f"/v1/sessions/{sid}").json()
        pending = view["pending"]
        assert pending["path"] == "payments/send_money", view["trace"]
        assert pending["missing_values"] == ["amount"]
        assert pending["values_schema"] == {
            "type": "object", "required": ["amount"], "additionalProperties": False,
            "properties": {"amount": {"type": "number", "description": "amount in dollars"}}}

        check_refusals(client.post, client.get, sid)
        done = check_answered(client.post, client.get, sid, wait)
        assert done["calls"][0]["arguments"]["payee"] == "Asha"
