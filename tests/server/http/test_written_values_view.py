"""With `missing_values: write` (the default, ask, pauses for the value instead:
test_session_values.py), a call whose required value the request did not hold ("Send money
to Asha": no amount) waits at its gate with `written_values` naming what the model wrote
rather than took from the request, so the approver reads it before approving; a value taken
from the request is not named (the CLI's and the runtime's tests show a call taken whole)."""

from __future__ import annotations

from pathlib import Path

from doubles import PlanEngine
from fastapi.testclient import TestClient
from routing_app_kit import make_app, make_settings, upload, wait_status


def pending_of(client: TestClient, catalog_id: str, task: str) -> dict[str, object]:
    r = client.post("/v1/sessions", json={"catalog": catalog_id, "task": task})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    assert wait_status(client, sid) == "paused"
    pending = client.get(f"/v1/sessions/{sid}").json()["pending"]
    assert pending["path"] == "payments/send_money" and pending["is_gated"] is True
    return pending


def test_the_gate_names_the_values_the_model_wrote(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, missing_values="write")
    with TestClient(make_app(settings, PlanEngine())) as client:
        catalog_id = upload(client)
        written = pending_of(client, catalog_id, "Send money to Asha")
        assert written["arguments"] == {"payee": "Asha", "amount": 5}  # the plan's values
        # the amount: no candidate in the request; the payee: PlanEngine answers every value
        # menu outside it (as a remote engine that ignores the constraint may), so it was
        # written too, not chosen from the request's "Asha" and "money"
        assert written["written_values"] == ["payee", "amount"]
        taken = pending_of(client, catalog_id, "Send 5 to Asha")
        assert taken["arguments"] == {"payee": "Asha", "amount": 5}
        assert taken["written_values"] == ["payee"]  # the amount is the request's own 5
