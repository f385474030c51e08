"""A routed call whose required value the request did not give ("Send money to Asha": no
amount) is asked of the MCP client's user, never made up: through elicitation where the client
supports it, else in the paused answer (`missing_values`, `values_schema`, a message naming
`supply_values`), answered with the `supply_values` tool.

Tier c: `stackroute mcp` serves examples/bank.catalog.json with the embedded model, driven by
the MCP SDK's own client. The model's part is routing the request to payments/send_money with
the payee taken from it; the router's `ask` option (the default) leaves the amount to the user.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp_kit import REPO_ROOT, GatewayClient

pytestmark = pytest.mark.model
BANK = REPO_ROOT / "examples" / "bank.catalog.json"
REQUEST = {"request": "Send money to Asha"}
LEAF = "payments/send_money"


class User:
    """Answers the values form from `values` (in turn: an (action, content) each; cancel once
    they are used up) and the approval form with approve=True."""

    def __init__(self) -> None:
        self.values: list[tuple[str, dict[str, Any] | None]] = []

    def __call__(self, message: str, schema: dict[str, Any],
                 ) -> tuple[str, dict[str, Any] | None]:
        if "approve" in schema["properties"]:
            return "accept", {"approve": True}
        return self.values.pop(0) if self.values else ("cancel", None)


@pytest.fixture(scope="module")
def user() -> User:
    return User()


@pytest.fixture(scope="module")
def asking_client(user: User, tmp_path_factory: pytest.TempPathFactory,
                  ) -> Iterator[GatewayClient]:
    db = tmp_path_factory.mktemp("mcp-ask") / "gateway.db"
    client = GatewayClient(["mcp", str(BANK), "--db", str(db)], elicitor=user)
    yield client
    client.close()


@pytest.fixture(scope="module")
def plain_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayClient]:
    db = tmp_path_factory.mktemp("mcp-plain") / "gateway.db"
    client = GatewayClient(["mcp", str(BANK), "--db", str(db)])
    yield client
    client.close()


def test_elicitation_asks_the_user_for_the_amount_then_for_approval(
        asking_client: GatewayClient, user: User) -> None:
    user.values = [("accept", {"amount": 500})]
    answer = asking_client.call("route", REQUEST)
    assert answer["status"] == "done", answer
    sent = [c for c in answer["calls"] if c["path"] == LEAF]
    assert len(sent) == 1
    assert sent[0]["arguments"] == {"payee": "Asha", "amount": 500}
    assert sent[0]["supplied_values"] == ["amount"] and "missing_values" not in sent[0]
    values_form, approval_form = asking_client.requested_schemas[:2]
    assert values_form == {"type": "object", "required": ["amount"], "properties": {
        "amount": {"type": "number", "description": "amount in dollars"}}}
    assert "amount" in asking_client.elicited[0]
    assert "approve" in approval_form["properties"]
    assert '"amount": 500' in asking_client.elicited[1].replace("'", '"')


def test_a_cancelled_form_leaves_the_call_waiting_for_supply_values(
        asking_client: GatewayClient, user: User) -> None:
    user.values = [("cancel", None)]
    waiting = asking_client.call("route", REQUEST)
    assert waiting["status"] == "paused", waiting
    assert waiting["pending"]["missing_values"] == ["amount"]
    assert "`supply_values`" in waiting["message"]
    # the values given now, the approval form (answered yes) runs the call
    done = asking_client.call("supply_values", {"id": waiting["id"],
                                                "values": {"amount": 20}})
    assert done["status"] == "done", done
    assert [c["arguments"] for c in done["calls"] if c["path"] == LEAF] == [
        {"payee": "Asha", "amount": 20}]


def test_a_refused_answer_says_why_and_the_call_still_waits(
        asking_client: GatewayClient, user: User) -> None:
    user.values = [("accept", {"amount": "lots"})]
    refused = asking_client.call("route", REQUEST)
    assert refused["status"] == "paused", refused
    assert refused["pending"]["missing_values"] == ["amount"]
    assert refused["message"].startswith("the values given were refused: values for "
                                         f"{LEAF} do not fit its schema")
    assert not [c for c in refused["calls"] if c["path"] == LEAF]


def test_a_declined_form_rejects_the_call(asking_client: GatewayClient, user: User) -> None:
    user.values = [("decline", None)]  # asked again (the model may choose it again): cancel
    answer = asking_client.call("route", REQUEST)
    assert answer["status"] in ("done", "paused"), answer
    assert not [c for c in answer["calls"] if c["path"] == LEAF]  # nothing was sent
    if answer["status"] == "paused":  # the model chose send_money again: asked again
        assert answer["pending"]["missing_values"] == ["amount"]


def test_without_elicitation_the_answer_asks_and_supply_values_answers(
        plain_client: GatewayClient) -> None:
    waiting = plain_client.call("route", REQUEST)
    assert waiting["status"] == "paused", waiting
    pending = waiting["pending"]
    assert pending["path"] == LEAF and pending["arguments"] == {"payee": "Asha"}
    assert pending["missing_values"] == ["amount"]
    assert pending["values_schema"] == {
        "type": "object", "properties": {"amount": {"type": "number",
                                                    "description": "amount in dollars"}},
        "required": ["amount"], "additionalProperties": False}
    assert "amount" in waiting["message"] and "`supply_values`" in waiting["message"]
    session = waiting["id"]

    with pytest.raises(RuntimeError, match=r"do not fit its schema.*amount"):
        plain_client.call("supply_values", {"id": session, "values": {"amount": "lots"}})
    with pytest.raises(RuntimeError, match="waits only for amount"):
        plain_client.call("supply_values", {"id": session,
                                            "values": {"amount": 5, "payee": "Bo"}})
    with pytest.raises(RuntimeError, match="not for approval"):
        plain_client.call("approve", {"id": session})
    still = plain_client.call("result", {"id": session})
    assert still["status"] == "paused" and still["pending"]["missing_values"] == ["amount"]

    gated = plain_client.call("supply_values", {"id": session, "values": {"amount": 500}})
    assert gated["status"] == "paused"  # send_money is sensitive: now at its gate
    assert gated["pending"]["arguments"] == {"payee": "Asha", "amount": 500}
    assert gated["pending"]["supplied_values"] == ["amount"]
    assert "missing_values" not in gated["pending"] and "approval" in gated["message"]
    with pytest.raises(RuntimeError, match="waits for approval, not for values"):
        plain_client.call("supply_values", {"id": session, "values": {"amount": 1}})

    done = plain_client.call("approve", {"id": session})
    assert done["status"] == "done", done
    sent = [c for c in done["calls"] if c["path"] == LEAF]
    assert sent[-1]["arguments"] == {"payee": "Asha", "amount": 500}
    assert sent[-1]["supplied_values"] == ["amount"]


def test_the_missing_values_flag_makes_the_gateway_write_the_value(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # `stackroute mcp --missing-values write`: the value is made up, marked as written, and the
    # call waits at send_money's approval gate instead of asking for it
    db = tmp_path_factory.mktemp("mcp-write") / "gateway.db"
    client = GatewayClient(["mcp", str(BANK), "--db", str(db), "--missing-values", "write"])
    try:
        answer = client.call("route", REQUEST)
    finally:
        client.close()
    assert answer["status"] == "paused", answer
    pending = answer["pending"]
    assert pending["path"] == LEAF and "missing_values" not in pending, pending
    assert pending["arguments"]["payee"] == "Asha" and "amount" in pending["arguments"]
    assert pending["written_values"] == ["amount"]


def test_a_bad_values_flag_is_refused_with_the_choices() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "stackroute.server.cli", "mcp", str(BANK),
                           "--optional-values", "sometimes"], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 2
    assert "sometimes" in done.stderr and "meaning" in done.stderr and "words" in done.stderr
