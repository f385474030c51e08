"""A tools request that lacks a required value gets a question, not a made-up value; the
user's reply is routed with the request it completes (the real app on real uvicorn with the
embedded model, driven by the official `openai` client)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from live_server import serve, server_settings
from stackroute.server.http.app import create_app
from stackroute.server.routing.options import MissingValues
from test_openai_tools import BANK_TOOLS

ASK = [{"role": "user", "content": "Send money to Alice"}]


def _client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0,
                         timeout=600)


@pytest.fixture(scope="module")
def live(embedded_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from stackroute.server.engines.transformers_engine import TransformersEngine

    engine = TransformersEngine(loaded=embedded_model)
    tmp = tmp_path_factory.mktemp("openai-values")
    with serve(create_app(server_settings(tmp), engine=engine)) as base_url:
        yield base_url


@pytest.mark.model
def test_the_missing_amount_is_asked_and_the_reply_completes_the_call(live: str) -> None:
    client = _client(live)
    model = client.models.list().data[0].id
    reply = client.chat.completions.create(model=model, messages=ASK, tools=BANK_TOOLS,  # type: ignore[arg-type]
                                           tool_choice="required")
    message = reply.choices[0].message
    routing = reply.model_extra["tool_routing"]  # type: ignore[index]
    assert message.tool_calls is None and reply.choices[0].finish_reason == "stop"
    assert routing["outcome"] == "values_needed", routing
    assert routing["missing_values"] == ["amount"], routing
    assert message.content is not None
    assert message.content.startswith('To call send_money (payee: "Alice") I still need the '
                                      "amount (number"), message.content

    conversation = [*ASK, {"role": "assistant", "content": message.content},
                    {"role": "user", "content": "150"}]
    reply = client.chat.completions.create(model=model, messages=conversation,  # type: ignore[arg-type]
                                           tools=BANK_TOOLS, tool_choice="required")
    [call] = reply.choices[0].message.tool_calls or []
    routing = reply.model_extra["tool_routing"]  # type: ignore[index]
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "send_money", {"payee": "Alice", "amount": 150})
    assert routing["outcome"] == "tool_call" and routing["written_values"] == []


@pytest.mark.model
def test_the_question_streams_as_text(live: str) -> None:
    client = _client(live)
    model = client.models.list().data[0].id
    stream = client.chat.completions.create(
        model=model, messages=ASK, tools=BANK_TOOLS, tool_choice="required", stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("To call send_money"), text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].model_extra["tool_routing"]["outcome"] == "values_needed"  # type: ignore[index]


@pytest.mark.model
def test_with_missing_values_write_the_value_is_made_up_and_named(
        embedded_model: Any, tmp_path: Any) -> None:
    from stackroute.server.engines.transformers_engine import TransformersEngine

    engine = TransformersEngine(loaded=embedded_model)
    settings = server_settings(tmp_path, missing_values=MissingValues.WRITE)
    with serve(create_app(settings, engine=engine)) as base_url:
        client = _client(base_url)
        reply = client.chat.completions.create(
            model=client.models.list().data[0].id, messages=ASK, tools=BANK_TOOLS,  # type: ignore[arg-type]
            tool_choice="required")
    [call] = reply.choices[0].message.tool_calls or []
    routing = reply.model_extra["tool_routing"]  # type: ignore[index]
    assert routing["written_values"] == ["amount"], (call.function.arguments, routing)
    assert routing["missing_values"] == []
