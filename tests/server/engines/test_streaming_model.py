"""Token streaming with the embedded model (tier c): the transformers engine sends its answer
per decoder pass under the same constraint, the deltas join to exactly what `generate`
answers, and the OpenAI endpoint on real uvicorn delivers a constrained answer in pieces."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai
import pytest
from live_server import serve, server_settings
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.server.engines.base import Constraint, SamplingOptions, TextDelta
from stackroute.server.http.app import create_app

pytestmark = pytest.mark.model

PROMPT = Prompt((Message("user", "Describe a sunny day at the beach."),))
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 24},
                                           "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


def streamed(engine: Any, **kwargs: Any) -> tuple[list[str], Any]:
    deltas: list[TextDelta] = []
    gen = engine.generate_stream(PROMPT, on_delta=deltas.append, **kwargs)
    return [d.text for d in deltas], gen


@pytest.mark.parametrize("constraint", [
    None, Constraint.json(PERSON), Constraint.regex("[A-Z][a-z]+( [a-z]+){2,5}\\."),
    Constraint.choice(["sunny", "rainy", "windy"])], ids=["free", "json", "regex", "choice"])
def test_deltas_join_to_what_generate_answers(engine: Any, constraint: Any) -> None:
    sampling = SamplingOptions(max_tokens=12)
    whole = engine.generate(PROMPT, constraint=constraint, sampling=sampling)
    pieces, gen = streamed(engine, constraint=constraint, sampling=sampling)
    assert "".join(pieces) == gen.text == whole.text
    assert all(pieces)
    if constraint is None or constraint.kind.value != "choice":
        # at most one delta per decoder pass (and the last pick, which needs no pass of its
        # own), and more than one for an answer of several passes
        assert 1 < len(pieces) <= gen.usage.forward_passes + 1
    else:
        assert pieces == [gen.text]  # a menu is decided in one pass
    if constraint is not None and constraint.kind.value == "json":
        assert pieces[0].startswith('{"name":"')  # the forced opening rides with pass one
        jsonschema.validate(json.loads(gen.text), PERSON)


def test_a_stop_string_never_reaches_the_stream(engine: Any) -> None:
    whole = engine.generate(PROMPT, sampling=SamplingOptions(max_tokens=24))
    stop = whole.text[6:9]  # three characters from inside the answer
    pieces, gen = streamed(engine, sampling=SamplingOptions(max_tokens=24, stop=(stop,)))
    assert "".join(pieces) == gen.text and stop not in gen.text
    assert whole.text.startswith(gen.text)


@pytest.fixture(scope="module")
def client(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[openai.OpenAI]:
    tmp = tmp_path_factory.mktemp("streaming-live")
    with serve(create_app(server_settings(tmp), engine=engine)) as base_url:
        yield openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0,
                            timeout=300)


def test_a_json_schema_answer_streams_in_pieces(client: openai.OpenAI) -> None:
    started = time.perf_counter()
    arrivals: list[tuple[float, str]] = []
    for chunk in client.chat.completions.create(
            model=client.models.list().data[0].id, max_tokens=30, stream=True,
            messages=[{"role": "user", "content": "A person: name and age, as JSON."}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "schema": PERSON}}):
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append((time.perf_counter() - started, chunk.choices[0].delta.content))
    text = "".join(piece for _, piece in arrivals)
    jsonschema.validate(json.loads(text), PERSON)
    assert len(arrivals) > 2
    assert arrivals[0][0] < arrivals[-1][0]  # spread over the generation, not sent at once
