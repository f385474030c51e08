"""Tool calling with the abstention check on (`abstain`): the real app on real uvicorn with
the embedded model and its shipped check, driven by the official `openai` client. A request
no tool serves gets an answer with no tool call, and `tool_routing.declined` says which tool
the check stopped and why; a request a tool serves still gets its call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from live_server import serve, server_settings
from stackroute.server.http.app import create_app
from test_openai_tools import BANK_TOOLS, MAX_TOKENS, SCHEMAS


@pytest.fixture(scope="module")
def client(embedded_model: Any, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[openai.OpenAI]:
    from stackroute.server.engines.transformers_engine import TransformersEngine

    engine = TransformersEngine(loaded=embedded_model)
    tmp = tmp_path_factory.mktemp("openai-abstain")
    with serve(create_app(server_settings(tmp, abstain=True), engine=engine)) as base_url:
        yield openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0,
                            timeout=600)


def _chat(client: openai.OpenAI, text: str) -> Any:
    model = client.models.list().data[0].id
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": text}],
        tools=BANK_TOOLS, max_tokens=MAX_TOKENS)  # type: ignore[arg-type]


@pytest.mark.model
def test_a_request_no_tool_serves_gets_no_call_and_says_which_tool_did_not_fit(
        client: openai.OpenAI) -> None:
    response = _chat(client, "Open a new savings account for my daughter")
    choice = response.choices[0]
    routing = response.model_extra["tool_routing"]  # type: ignore[index]
    print(f"\nrouting: {json.dumps(routing)}")
    assert choice.finish_reason in {"stop", "length"} and choice.message.tool_calls is None
    assert routing["outcome"] == "no_call" and routing["path"] is None
    declined = routing["declined"]
    assert declined["function"] in SCHEMAS  # the client's own name for the tool
    assert declined["path"].rsplit("/", 1)[-1] == declined["function"]
    assert declined["fit"] < declined["threshold"]


@pytest.mark.model
def test_a_request_a_tool_serves_is_still_called(client: openai.OpenAI) -> None:
    response = _chat(client, "Send 25 dollars to Alice")
    routing = response.model_extra["tool_routing"]  # type: ignore[index]
    calls = response.choices[0].message.tool_calls or []
    print(f"\ncalled: {[c.function.name for c in calls]}, routing {routing}")
    assert routing["declined"] is None
    assert [c.function.name for c in calls] == ["send_money"]
