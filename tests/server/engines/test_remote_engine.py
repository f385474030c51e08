"""The remote engine over real HTTP on loopback (tier c).

Against `stackroute serve` itself (our app over the session's transformers engine, on real
uvicorn): its decisions, probabilities and JSON arguments equal the in-process engine's on the
same prompts. Against small fake servers (FastAPI apps on loopback): it retries what is
retryable and nothing else, and it refuses answers from a server that ignores the constraint.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from live_server import serve, server_settings
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.errors import InputError
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.server.engines.base import Constraint, SamplingOptions
from stackroute.server.engines.option_scoring import InvalidMenuError, OptionBiasError
from stackroute.server.engines.registry import create_engine
from stackroute.server.engines.remote_engine import (
    RemoteEngine,
    RemoteEngineError,
    RemoteFeatureError,
    RemoteOptions,
    RemoteRejectedError,
    RemoteUnavailableError,
)
from stackroute.server.http.app import create_app
from upstream_kit import FAST_RETRY, OK, UNAVAILABLE, Script, completion, fake_server

SYSTEM = Message("system", "You route requests to tools. Answer with one option name.")
MENUS = [
    ("search_web", "create_ticket", "ask_user", "DONE"),
    ("pay", "payment", "payments_history", "BACK", "DONE"),  # shared prefixes
    ("weather", "calendar", "email", "maps", "notes", "DONE"),
    (*(f"tool_{i:02d}" for i in range(24)), "DONE"),  # more options than top_logprobs
]
REQUESTS = ["Find recent news about solar panels on the internet.",
            "I want to see my last three card payments.",
            "Will it rain in Paris tomorrow?",
            "Open tool number seven."]
ARGS_SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                "days": {"type": "integer", "minimum": 1,
                                                         "maximum": 7}},
               "required": ["city", "days"], "additionalProperties": False}


def menu_prompt(request: str, options: tuple[str, ...]) -> Prompt:
    return Prompt((SYSTEM, Message("user", f"Request: {request}\nOptions: "
                                           f"{', '.join(options)}\nAnswer with one option.")))


# -- against our own server -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def live(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(create_app(server_settings(tmp_path_factory.mktemp("remote")),
                          engine=engine)) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def remote(live: str) -> Iterator[RemoteEngine]:
    with RemoteEngine(base_url=live, options=FAST_RETRY) as engine:
        yield engine


@pytest.mark.model
@pytest.mark.parametrize(("request_text", "options"), list(zip(REQUESTS, MENUS, strict=True)))
def test_decisions_equal_the_in_process_engine(remote: RemoteEngine, engine: Any,
                                               request_text: str,
                                               options: tuple[str, ...]) -> None:
    prompt = menu_prompt(request_text, options)
    local = engine.choose(prompt, options)
    far = remote.choose(prompt, options)
    assert far.choice == local.choice
    assert set(far.probabilities) == set(options)
    assert math.isclose(sum(far.probabilities.values()), 1.0, rel_tol=1e-9)
    if len(options) <= 20:  # the server shows every option: the distribution is exact
        # ... up to float32 rounding: the server's call finds the prompt's KV in the prefix
        # cache that the local call filled, so its menu pass sums in another order (measured
        # differences up to 1.3e-6 on a loaded 2-core box).
        for option in options:
            assert far.probabilities[option] == pytest.approx(local.probabilities[option],
                                                              abs=1e-5)
    assert far.usage.prompt_tokens == engine.count_tokens(prompt)


@pytest.mark.model
def test_option_bias_matches_the_in_process_engine(remote: RemoteEngine, engine: Any) -> None:
    options = MENUS[0]
    prompt = menu_prompt(REQUESTS[0], options)
    unbiased = engine.choose(prompt, options)
    runner_up = sorted(options, key=lambda o: -unbiased.probabilities[o])[1]
    bias = {runner_up: 3.0 + math.log(unbiased.probabilities[unbiased.choice]
                                      / unbiased.probabilities[runner_up])}
    local = engine.choose(prompt, options, option_bias=bias)
    far = remote.choose(prompt, options, option_bias=bias)
    assert far.choice == local.choice == runner_up
    for option in options:
        assert far.probabilities[option] == pytest.approx(local.probabilities[option], abs=1e-6)
    assert far.margin == pytest.approx(local.margin, abs=1e-6)


@pytest.mark.model
def test_json_arguments_validate_and_equal_in_process(remote: RemoteEngine,
                                                      engine: Any) -> None:
    prompt = Prompt((SYSTEM, Message("user", "Weather in Oslo for the next 3 days. Give the "
                                             f"arguments as JSON: {json.dumps(ARGS_SCHEMA)}")))
    sampling = SamplingOptions(max_tokens=40)
    far = remote.generate(prompt, constraint=Constraint.json(ARGS_SCHEMA), sampling=sampling)
    local = engine.generate(prompt, constraint=Constraint.json(ARGS_SCHEMA), sampling=sampling)
    assert far.finish_reason == "stop"
    jsonschema.validate(json.loads(far.text), ARGS_SCHEMA)
    assert far.text == local.text


@pytest.mark.model
def test_regex_choice_logprobs_and_raw_prompts(remote: RemoteEngine) -> None:
    prompt = menu_prompt("What is two plus two?", ("four",))
    digits = remote.generate(prompt, constraint=Constraint.regex(r"[0-9]{1,3}"),
                             sampling=SamplingOptions(max_tokens=4, top_logprobs=2))
    assert digits.text.isdigit() and digits.logprobs is not None
    assert all(len(t.top) <= 2 for t in digits.logprobs)
    choice = remote.generate(prompt, constraint=Constraint.choice(["yes", "no"]),
                             sampling=SamplingOptions(top_logprobs=0))
    assert choice.text in ("yes", "no") and choice.finish_reason == "stop"
    raw = remote.generate("The capital of France is", sampling=SamplingOptions(max_tokens=3))
    assert raw.finish_reason in ("stop", "length") and raw.usage.generated_tokens >= 1


@pytest.mark.model
def test_usage_reports_the_servers_prefix_cache(remote: RemoteEngine, engine: Any) -> None:
    first = menu_prompt("Send an email to Ana about the report.", MENUS[2])
    second = first.extend(Message("assistant", "email"),
                          Message("user", "email returned: sent. Answer DONE or BACK."))
    remote.choose(first, MENUS[2])
    usage = remote.choose(second, ("DONE", "BACK")).usage
    assert usage.prompt_tokens == engine.count_tokens(second)
    assert usage.cached_tokens >= engine.count_tokens(first) - 1  # the whole first call
    assert usage.prefill_tokens == usage.prompt_tokens - usage.cached_tokens
    assert remote.count_tokens(second) == engine.count_tokens(second)  # no /tokenize: fallback


@pytest.mark.model
def test_prepare_warms_every_constraint_and_registry_builds_it(live: str,
                                                               tmp_path: Path) -> None:
    catalog = tmp_path / "c.json"
    catalog.write_text(json.dumps({"name": "root", "children": [
        {"name": "mail", "description": "email", "children": [
            {"name": "send", "description": "send mail", "parameters": {
                "type": "object", "properties": {"to": {"type": "string"}}}}]},
        {"name": "clock", "description": "the time"}]}))
    made = create_engine("remote", base_url=live)
    assert isinstance(made, RemoteEngine)
    stats = made.prepare(load_catalog(catalog))
    assert (stats.num_menus, stats.num_schemas) == (3, 2)
    assert made.metrics()["requests"] >= 6  # /v1/models, then one per constraint
    with pytest.raises(InvalidMenuError):
        made.choose(menu_prompt("x", ("a",)), [])
    made.close()


@pytest.mark.model
def test_api_key_is_sent_and_a_wrong_one_is_refused(engine: Any, tmp_path: Path) -> None:
    settings = server_settings(tmp_path, api_key="s3cret")
    with serve(create_app(settings, engine=engine)) as base_url:
        with RemoteEngine(base_url=base_url, api_key="s3cret") as good:
            assert good.choose(menu_prompt("hi", ("yes", "no")), ("yes", "no")).choice
        with pytest.raises(RemoteRejectedError, match="401"):
            RemoteEngine(base_url=base_url, api_key="wrong", options=FAST_RETRY)


# -- against fake servers -------------------------------------------------------------------------
PROMPT = menu_prompt("pick a", ("a", "b"))


def test_retries_a_flaky_server_then_succeeds() -> None:
    chat = Script(UNAVAILABLE, (429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}),
                  (502, {}, {}), OK)
    models = Script(UNAVAILABLE, (200, {"data": [{"id": "fake"}]}, {}))
    with serve(fake_server(chat, models)) as url, \
            RemoteEngine(base_url=url, options=FAST_RETRY) as remote:
        result = remote.choose(PROMPT, ("a", "b"))
        assert result.choice == "a" and result.usage.cached_tokens == 4
        assert result.probabilities["a"] == pytest.approx(math.exp(-0.1))
        assert len(chat.bodies) == 4 and remote.metrics()["retries"] == 4
        body = chat.bodies[-1]
        assert body["structured_outputs"] == {"choice": ["a", "b"]}
        assert body["logprobs"] is True and body["temperature"] == 0.0


@pytest.mark.parametrize("status", [400, 404, 500])
def test_does_not_retry_what_would_fail_again(status: int) -> None:
    chat = Script((status, {"error": {"message": "nope"}}, {}))
    with serve(fake_server(chat)) as url, \
            RemoteEngine(base_url=url, options=FAST_RETRY) as remote:
        with pytest.raises(RemoteRejectedError, match=str(status)):
            remote.choose(PROMPT, ("a", "b"))
        assert len(chat.bodies) == 1


def test_gives_up_after_the_retries_and_on_a_long_retry_after() -> None:
    chat = Script(UNAVAILABLE)  # /v1/models answers; chat stays down
    with serve(fake_server(chat)) as url, \
            RemoteEngine(base_url=url, options=RemoteOptions(backoff_s=0.01, max_retries=2)) \
            as remote, pytest.raises(RemoteUnavailableError, match="3 attempt"):
        remote.choose(PROMPT, ("a", "b"))
    chat = Script((429, {}, {"Retry-After": "3600"}))
    with serve(fake_server(chat)) as url, \
            RemoteEngine(base_url=url, options=FAST_RETRY) as remote:
        started = time.monotonic()
        with pytest.raises(RemoteUnavailableError, match="1 attempt"):
            remote.choose(PROMPT, ("a", "b"))
        assert time.monotonic() - started < 5


def test_connection_refused_is_retried_then_unavailable() -> None:
    with socket.socket() as sock:  # a port nothing listens on once the socket closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RemoteUnavailableError, match="ConnectError"):
        RemoteEngine(base_url=f"http://127.0.0.1:{port}",
                     options=RemoteOptions(backoff_s=0.01, max_retries=2))


@pytest.mark.parametrize(("answer", "error", "words"), [
    (completion("I would pick a, because it fits."), RemoteFeatureError, "ignored the choice"),
    ({"choices": [{"message": {"content": "a"}, "finish_reason": "stop"}]},
     RemoteFeatureError, "no logprobs"),
    (completion("a", finish="length"), RemoteEngineError, "cut the menu answer off"),
    ({"choices": []}, RemoteFeatureError, "unexpected shape"),
])
def test_refuses_a_server_that_ignores_the_constraint(answer: dict[str, Any],
                                                      error: type[Exception],
                                                      words: str) -> None:
    with serve(fake_server(Script((200, answer, {})))) as url, \
            RemoteEngine(base_url=url, options=FAST_RETRY) as remote, \
            pytest.raises(error, match=words):
        remote.choose(PROMPT, ("a", "b"))


def test_json_that_breaks_the_schema_is_refused() -> None:
    with serve(fake_server(Script((200, completion('{"city": 3}'), {})))) as url, \
            RemoteEngine(base_url=url, options=FAST_RETRY) as remote, \
            pytest.raises(RemoteFeatureError, match="JSON schema"):
        remote.generate(PROMPT, constraint=Constraint.json(ARGS_SCHEMA))


def test_a_server_refusing_structured_outputs_is_a_feature_error() -> None:
    refusal = (400, {"error": {"message": "unsupported field(s): structured_outputs"}}, {})
    with serve(fake_server(Script(refusal))) as url, \
            RemoteEngine(base_url=url, options=FAST_RETRY) as remote, \
            pytest.raises(RemoteFeatureError, match="refused a field"):
        remote.choose(PROMPT, ("a", "b"))


def test_option_bias_on_an_inexact_distribution_is_refused() -> None:
    # vLLM-style token steps for options that share "pay": the top-k leaves mass unseen.
    steps = [{"token": "pay", "logprob": -0.2, "top_logprobs": [
                 {"token": "pay", "logprob": -0.2}, {"token": "p", "logprob": -2.5}]},
             {"token": "", "logprob": -0.3, "top_logprobs": [
                 {"token": "", "logprob": -0.3}, {"token": "ment", "logprob": -1.5}]}]
    options = ("pay", "payment", "payments_history")
    chat = Script((200, completion("pay", logprobs=steps), {}))
    with serve(fake_server(chat)) as url, \
            RemoteEngine(base_url=url, options=FAST_RETRY) as remote:
        result = remote.choose(PROMPT, options)
        assert result.choice == "pay" and remote.metrics()["inexact_menus"] == 1
        assert math.isclose(sum(result.probabilities.values()), 1.0)
        assert result.probabilities["pay"] > result.probabilities["payments_history"] > 0
        with pytest.raises(OptionBiasError, match="exact"):
            remote.choose(PROMPT, options, option_bias={"payment": 1.0})


def test_the_prefix_cache_cannot_be_switched_off_from_here() -> None:
    with pytest.raises(InputError, match="server's own"):
        RemoteEngine(base_url="http://127.0.0.1:9", is_cache_enabled=False)


IMPORTS_WITHOUT_VLLM = """
import importlib.util, sys
import stackroute.server.http.app, stackroute.server.engines.remote_engine
import stackroute.server.engines.vllm_engine
from stackroute.server.engines.registry import BUILT_IN, create_engine
assert {"remote", "vllm", "transformers"} <= set(BUILT_IN)
assert "vllm" not in sys.modules, "importing the engines imported vLLM"
if importlib.util.find_spec("vllm") is None:
    try:
        create_engine("vllm")
    except Exception as error:
        assert type(error).__name__ == "VllmNotInstalledError", error
        assert "pip install 'stackroute[vllm]'" in str(error)
    else:
        raise AssertionError("engine 'vllm' started without vLLM")
"""


def test_the_engines_import_and_register_without_vllm() -> None:
    done = subprocess.run([sys.executable, "-c", IMPORTS_WITHOUT_VLLM], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
