"""The OpenAI-compatible API and the service shell, over real HTTP on a loopback port.

The model tests run the real app on real uvicorn with the embedded model and talk to it with
the official `openai` client, unchanged. Queue, body-limit and error-path tests use a fake
engine (a test double of the Engine protocol) so they are fast and deterministic.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from doubles import RecordingEngine
from live_server import serve, server_settings
from prometheus_client.parser import text_string_to_metric_families
from stackroute.server.engines.base import (
    Constraint,
    EngineInfo,
    Generation,
    PromptInput,
    SamplingOptions,
)
from stackroute.server.http.app import create_app

MAX_TOKENS = 12  # the model is 135M on a couple of CPU cores: keep answers short
YES_NO_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string",
                                                             "enum": ["yes", "no"]}},
                 "required": ["answer"], "additionalProperties": False}
QUESTION = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]


# -- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def live(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real app with the embedded model, no API key."""
    tmp = tmp_path_factory.mktemp("openai-live")
    with serve(create_app(server_settings(tmp), engine=engine)) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def client(live: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live}/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def model_id(client: openai.OpenAI) -> str:
    return client.models.list().data[0].id


class FakeEngine(RecordingEngine):
    """The recording double with a `gate` that lets a test hold calls inside the engine;
    `error` makes every call raise it."""

    info = EngineInfo(engine="fake", model="fake-model", max_context_tokens=512)

    def __init__(self, *, error: Exception | None = None) -> None:
        super().__init__(error=error)
        self.gate = threading.Event()
        self.gate.set()
        self.num_calls = 0

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        self.num_calls += 1
        if not self.gate.wait(timeout=60):
            raise TimeoutError("the test never opened the gate")
        return super().generate(prompt, constraint=constraint, sampling=sampling)

    def metrics(self) -> dict[str, float]:
        return {"prefill_tokens": 4.0 * self.num_calls, "cached_tokens": 0.0}


def _chat(base_url: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60, **kwargs)


def _metrics(base_url: str) -> dict[str, Any]:
    text = httpx.get(f"{base_url}/metrics", timeout=30).text
    return {family.name: family for family in text_string_to_metric_families(text)}


def _sample(families: dict[str, Any], name: str, **labels: str) -> float:
    family = families[name]
    for sample in family.samples:
        if sample.name in {name, f"{name}_total"} and all(
                sample.labels.get(k) == v for k, v in labels.items()):
            return float(sample.value)
    raise KeyError(f"no sample {name} {labels}")


def _wait_for(predicate: Any, *, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.02)


# -- the real model through the openai client ------------------------------------------------
@pytest.mark.model
def test_models_lists_the_served_model(client: openai.OpenAI, engine: Any) -> None:
    models = client.models.list().data
    assert [m.id for m in models] == [engine.info.model]
    assert client.models.retrieve(engine.info.model).id == engine.info.model


@pytest.mark.model
def test_chat_choice_via_structured_outputs(client: openai.OpenAI, model_id: str) -> None:
    options = ["yes", "no", "maybe"]
    response = client.chat.completions.create(
        model=model_id, messages=QUESTION, max_tokens=MAX_TOKENS,  # type: ignore[arg-type]
        extra_body={"structured_outputs": {"choice": options}})
    choice = response.choices[0]
    assert choice.message.content in options
    assert choice.finish_reason == "stop"
    usage = response.usage
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details is not None
    assert 0 <= (usage.prompt_tokens_details.cached_tokens or 0) <= usage.prompt_tokens


@pytest.mark.model
def test_chat_json_schema_via_response_format(client: openai.OpenAI, model_id: str) -> None:
    response = client.chat.completions.create(
        model=model_id, messages=QUESTION, max_tokens=30,  # type: ignore[arg-type]
        response_format={"type": "json_schema",
                         "json_schema": {"name": "answer", "schema": YES_NO_SCHEMA,
                                         "strict": True}})
    assert response.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(response.choices[0].message.content or ""), YES_NO_SCHEMA)


@pytest.mark.model
def test_chat_logprobs_of_a_choice_cover_every_option(client: openai.OpenAI,
                                                      model_id: str) -> None:
    response = client.chat.completions.create(
        model=model_id, messages=QUESTION, logprobs=True, top_logprobs=2,  # type: ignore[arg-type]
        extra_body={"structured_outputs": {"choice": ["yes", "no"]}})
    choice = response.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content
    entry = choice.logprobs.content[0]
    assert entry.token == choice.message.content
    tops = {t.token: t.logprob for t in entry.top_logprobs}
    assert set(tops) == {"yes", "no"}
    assert sum(2.718281828 ** lp for lp in tops.values()) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.model
def test_chat_logprobs_of_free_text(client: openai.OpenAI, model_id: str) -> None:
    response = client.chat.completions.create(
        model=model_id, messages=QUESTION, max_tokens=4, logprobs=True,  # type: ignore[arg-type]
        top_logprobs=3)
    content = response.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content and response.usage is not None
    assert len(content) <= response.usage.completion_tokens
    for entry in content:
        assert entry.logprob <= 0 and 1 <= len(entry.top_logprobs) <= 3
        assert entry.top_logprobs[0].logprob >= entry.logprob - 1e-6


@pytest.mark.model
def test_chat_stream_joins_to_the_answer(client: openai.OpenAI, model_id: str) -> None:
    kwargs: dict[str, Any] = {"model": model_id, "messages": QUESTION, "max_tokens": 6}
    whole = client.chat.completions.create(**kwargs).choices[0].message.content
    chunks = list(client.chat.completions.create(
        **kwargs, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in {"stop", "length"}
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


@pytest.mark.model
def test_completions_raw_prompt_with_logprobs(client: openai.OpenAI, model_id: str) -> None:
    response = client.completions.create(model=model_id, prompt="The capital of France is",
                                         max_tokens=4, logprobs=2)
    choice = response.choices[0]
    assert choice.text and choice.finish_reason in {"stop", "length"}
    assert choice.logprobs is not None and choice.logprobs.tokens
    assert len(choice.logprobs.token_logprobs or []) == len(choice.logprobs.tokens)


@pytest.mark.model
def test_completions_regex_and_stream(client: openai.OpenAI, model_id: str) -> None:
    stream = client.completions.create(model=model_id, prompt="Two plus two is ", max_tokens=4,
                                       stream=True, extra_body={
                                           "structured_outputs": {"regex": "[0-9]{1,2}"}})
    text = "".join(c.choices[0].text for c in stream if c.choices)
    assert text.isdigit() and 1 <= len(text) <= 2


# -- fields this server does not implement: ignored and named, or refused when strict -----------
UNSUPPORTED = [
    ({"guided_choice": ["yes", "no"]}, "guided_choice"),
    ({"guided_json": {"type": "object"}}, "guided_json"),
    ({"logit_bias": {"1": 5}}, "logit_bias"),
    ({"frequency_penalty": 0.5}, "frequency_penalty"),
]


@pytest.fixture(scope="module")
def strict_client(engine: Any, tmp_path_factory: pytest.TempPathFactory,
                  ) -> Iterator[openai.OpenAI]:
    """The same model behind a server with `strict_openai`."""
    settings = server_settings(tmp_path_factory.mktemp("openai-strict"), strict_openai=True)
    with serve(create_app(settings, engine=engine)) as base_url:
        yield openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0,
                            timeout=300)


@pytest.mark.model
@pytest.mark.parametrize(("extra", "named"), UNSUPPORTED)
def test_unsupported_fields_are_ignored_and_named(client: openai.OpenAI, model_id: str,
                                                  extra: dict[str, Any], named: str) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=model_id, messages=QUESTION, max_tokens=2,  # type: ignore[arg-type]
        extra_body=extra)
    assert raw.http_response.status_code == 200
    assert raw.headers["x-stackroute-ignored-fields"] == named
    assert raw.parse().choices[0].message.content is not None


@pytest.mark.model
@pytest.mark.parametrize(("extra", "named"), [
    *UNSUPPORTED, ({"structured_outputs": {"grammar": "root ::= 'x'"}},
                   "structured_outputs.grammar")])
def test_unsupported_fields_are_400_naming_them_when_strict(
        strict_client: openai.OpenAI, model_id: str, extra: dict[str, Any], named: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        strict_client.chat.completions.create(model=model_id, messages=QUESTION,  # type: ignore[arg-type]
                                              extra_body=extra)
    assert caught.value.status_code == 400
    assert named in caught.value.message
    assert caught.value.code == "unsupported_field"


@pytest.mark.model
def test_common_client_fields_are_accepted(client: openai.OpenAI, model_id: str) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=model_id, max_tokens=4, temperature=0.8, top_p=0.9, seed=7, n=2,
        metadata={"team": "support"}, store=False, user="u-1", tools=[],
        messages=[{"role": "system", "content": "Answer briefly."},
                  {"role": "user", "name": "alice", "content": "Hello"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "greet", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "hi"},
                  {"role": "user", "content": "Say it again."}])
    assert raw.http_response.status_code == 200
    assert "x-stackroute-ignored-fields" not in raw.headers
    response = raw.parse()
    assert [c.index for c in response.choices] == [0, 1]
    assert all(isinstance(c.message.content, str) for c in response.choices)
    assert response.model_extra.get("tool_routing") is None  # no tools: plain chat


def test_top_p_keeps_the_smallest_set_that_reaches_it() -> None:
    import torch
    from stackroute.server.engines.decoding import _nucleus

    probs = torch.tensor([0.1, 0.5, 0.3, 0.1])
    kept = _nucleus(torch, probs.clone(), 0.7)
    assert kept.tolist() == pytest.approx([0.0, 0.5, 0.3, 0.0])
    assert _nucleus(torch, probs.clone(), 0.01).tolist() == pytest.approx([0, 0.5, 0, 0])


@pytest.mark.model
@pytest.mark.parametrize(("extra", "param"), [
    ({"n": 2, "stream": True}, "n"),
    ({"structured_outputs": {"choice": []}}, "structured_outputs.choice"),
    ({"structured_outputs": {"choice": ["a"], "regex": "a"}}, "structured_outputs"),
    ({"structured_outputs": {}}, "structured_outputs"),
    ({"structured_outputs": {"choice": ["a", "a"]}}, "structured_outputs.choice"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"max_tokens": 100_000}, "max_tokens"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"structured_outputs": {"regex": "("}}, None),
])
def test_unsupported_values_are_400(live: str, model_id: str, extra: dict[str, Any],
                                    param: str | None) -> None:
    response = _chat(live, {"model": model_id, "messages": QUESTION, **extra})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    assert error.get("param") == param


@pytest.mark.model
def test_validation_errors_are_422_naming_the_field(live: str) -> None:
    response = _chat(live, {"messages": [{"role": "robot", "content": "x"}]})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["param"] == "messages.0.role"
    assert _chat(live, {"messages": []}).json()["error"]["param"] == "messages"


@pytest.mark.model
def test_unknown_model_is_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=QUESTION)  # type: ignore[arg-type]
    assert caught.value.code == "model_not_found"


# -- operations ---------------------------------------------------------------------------------
@pytest.mark.model
def test_health_ready_and_request_ids(live: str) -> None:
    assert httpx.get(f"{live}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{live}/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    echoed = httpx.get(f"{live}/healthz", headers={"X-Request-ID": "trace-123"})
    assert echoed.headers["x-request-id"] == "trace-123"
    assert len(httpx.get(f"{live}/healthz").headers["x-request-id"]) == 32


@pytest.mark.model
def test_metrics_scrape_parses(live: str, client: openai.OpenAI, model_id: str) -> None:
    client.chat.completions.create(model=model_id, messages=QUESTION,  # type: ignore[arg-type]
                                   extra_body={"structured_outputs": {"choice": ["yes", "no"]}})
    families = _metrics(live)
    assert _sample(families, "stackroute_http_requests", route="/v1/chat/completions",
                   status="200") >= 1
    assert _sample(families, "stackroute_model_calls", endpoint="chat",
                   constraint="choice") >= 1
    prefilled = _sample(families, "stackroute_prompt_tokens", source="prefilled")
    cached = _sample(families, "stackroute_prompt_tokens", source="cached")
    assert prefilled > 0 and cached >= 0
    assert 0 <= _sample(families, "stackroute_prefix_cache_hit_rate") <= 1
    assert _sample(families, "stackroute_queue_depth") == 0
    assert "stackroute_constraint_compile_seconds" in families
    assert "stackroute_http_request_duration_seconds" in families


@pytest.mark.model
def test_openapi_documents_every_endpoint_and_the_error_shape(live: str) -> None:
    spec = httpx.get(f"{live}/openapi.json").json()
    for path in ("/v1/models", "/v1/chat/completions", "/v1/completions", "/healthz",
                 "/readyz", "/metrics"):
        assert path in spec["paths"], path
    chat = spec["paths"]["/v1/chat/completions"]["post"]
    for status in ("400", "422", "429", "500"):
        ref = chat["responses"][status]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/ErrorResponse")
    assert "text/event-stream" in chat["responses"]["200"]["content"]
    assert "HTTPValidationError" not in spec.get("components", {}).get("schemas", {})


# -- auth ---------------------------------------------------------------------------------------
@pytest.mark.model
def test_auth_on(engine: Any, tmp_path: Path) -> None:
    app = create_app(server_settings(tmp_path, api_key="s3cret"), engine=engine)
    with serve(app) as base_url:
        wrong = openai.OpenAI(base_url=f"{base_url}/v1", api_key="nope", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as caught:
            wrong.models.list()
        assert caught.value.code == "invalid_api_key"
        missing = httpx.get(f"{base_url}/v1/models")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        right = openai.OpenAI(base_url=f"{base_url}/v1", api_key="s3cret", max_retries=0)
        assert right.models.list().data[0].id == engine.info.model
        # Probes and scrapes stay open (see server/http/auth.py).
        for path in ("/healthz", "/readyz", "/metrics"):
            assert httpx.get(f"{base_url}{path}").status_code == 200, path
        security = httpx.get(f"{base_url}/openapi.json").json()["components"]["securitySchemes"]
        assert security["apiKey"]["scheme"].lower() == "bearer"


@pytest.mark.model
def test_auth_off_accepts_any_or_no_key(live: str, client: openai.OpenAI) -> None:
    assert client.models.list().data
    assert httpx.get(f"{live}/v1/models").status_code == 200


# -- backpressure, limits and failures (fake engine) -----------------------------------------------
def test_queue_full_is_429_with_retry_after(tmp_path: Path) -> None:
    fake = FakeEngine()
    fake.gate.clear()
    app = create_app(server_settings(tmp_path, max_queue=1, max_concurrency=1), engine=fake)
    body = {"messages": QUESTION}
    with serve(app) as base_url:
        results: list[int] = []

        def call() -> None:
            results.append(_chat(base_url, body).status_code)

        first = threading.Thread(target=call)
        first.start()
        _wait_for(lambda: _sample(_metrics(base_url), "stackroute_queue_running") == 1)
        second = threading.Thread(target=call)
        second.start()
        _wait_for(lambda: _sample(_metrics(base_url), "stackroute_queue_depth") == 1)
        refused = _chat(base_url, body)
        fake.gate.set()
        first.join(timeout=30)
        second.join(timeout=30)
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json()["error"]["code"] == "queue_full"
        assert results == [200, 200]
        assert _sample(_metrics(base_url), "stackroute_queue_rejected") == 1


def test_body_too_large_is_413(tmp_path: Path) -> None:
    app = create_app(server_settings(tmp_path, max_body_bytes=1024), engine=FakeEngine())
    big = {"messages": [{"role": "user", "content": "x" * 2048}]}
    with serve(app) as base_url:
        declared = _chat(base_url, big)
        assert declared.status_code == 413
        assert declared.json()["error"]["code"] == "request_too_large"

        def chunks() -> Iterator[bytes]:  # no Content-Length: a chunked body
            yield b'{"messages": [{"role": "user", "content": "'
            yield b"x" * 2048
            yield b'"}]}'

        chunked = httpx.post(f"{base_url}/v1/chat/completions", content=chunks(),
                             headers={"content-type": "application/json"})
        assert chunked.status_code == 413
        assert _chat(base_url, {"messages": QUESTION}).status_code == 200


def test_unexpected_error_is_500_with_request_id_only(tmp_path: Path) -> None:
    fake = FakeEngine(error=RuntimeError("secret internals"))
    with serve(create_app(server_settings(tmp_path), engine=fake)) as base_url:
        response = _chat(base_url, {"messages": QUESTION})
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "internal_error"
    assert error["request_id"] == response.headers["x-request-id"]
    assert "secret internals" not in response.text and "Traceback" not in response.text


def test_readyz_is_503_when_not_ready(tmp_path: Path) -> None:
    app = create_app(server_settings(tmp_path), engine=FakeEngine())
    with serve(app) as base_url:
        app.state.stackroute.is_ready = False  # as during shutdown
        response = httpx.get(f"{base_url}/readyz")
        assert response.status_code == 503 and response.json()["status"] == "not_ready"
        assert httpx.get(f"{base_url}/healthz").status_code == 200


# -- the command -----------------------------------------------------------------------------------
@pytest.mark.model
@pytest.mark.slow
def test_stackroute_serve_with_no_flags_starts_offline(embedded_model_dir: Path,
                                                       tmp_path: Path) -> None:
    """`stackroute serve` as a user runs it: the embedded default model, JSON logs, loopback.
    (The port and the db come from the environment so the test does not collide.)"""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "STACKROUTE_PORT": str(port), "STACKROUTE_DB": str(tmp_path / "db"),
           "STACKROUTE_CACHE_DIR": str(embedded_model_dir.parent), "HF_HUB_OFFLINE": "1"}
    env.pop("STACKROUTE_CONFIG", None)
    process = subprocess.Popen([sys.executable, "-m", "stackroute.server.cli", "serve"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    base_url = f"http://127.0.0.1:{port}"
    try:
        def is_ready() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited: {process.communicate()[1][-2000:]}")
            try:
                return httpx.get(f"{base_url}/readyz", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        _wait_for(is_ready, timeout_s=180)
        answer = _chat(base_url, {"messages": QUESTION,
                                  "structured_outputs": {"choice": ["yes", "no"]}})
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] in {"yes", "no"}
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    access = [line for line in lines if line.get("logger") == "stackroute.server.access"]
    assert any(line["path"] == "/v1/chat/completions" and line["status"] == 200
               and line["latency_ms"] > 0 and line["request_id"] for line in access)
    assert process.returncode == 0


def test_building_the_app_imports_no_model_library() -> None:
    """The HTTP layer is importable (and an app buildable) on a machine without torch/vLLM."""
    code = ("import sys\nfrom stackroute.server.http.app import create_app\n"
            "from stackroute.server.settings import ServerSettings\n"
            "create_app(ServerSettings(db=':memory:'))\n"
            "heavy = [m for m in ('torch', 'transformers', 'xgrammar', 'vllm') if m in "
            "sys.modules]\nsys.exit(f'imported {heavy}' if heavy else 0)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
