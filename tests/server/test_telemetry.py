"""OpenTelemetry: the real app on real uvicorn with a scripted engine (no model), its spans
read from the SDK's in-memory exporter and, once, from a real OTLP/HTTP receiver on loopback
that decodes the protobuf `ExportTraceServiceRequest` it is sent."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from doubles import PlanEngine, RecordingEngine
from live_server import serve
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from routing_app_kit import make_settings
from session_kit import BANK_CATALOG
from stackroute.runtime.decision import ArgumentsCall
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    Constraint,
    ConstraintKind,
    Generation,
    PromptInput,
    SamplingOptions,
)
from stackroute.server.engines.common import generation_from_choice
from stackroute.server.engines.remote_engine import RemoteEngine
from stackroute.server.http.app import create_app
from stackroute.server.telemetry import Telemetry, otlp_traces_url
from stackroute.server.telemetry_spans import routing_call_spans

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
WAIT_S = 30.0
BALANCE_PLAN = ("payments", "balance")  # root → payments (a frame) → balance (a leaf)


def run_session(base_url: str, *, headers: dict[str, str] | None = None) -> str:
    catalog = httpx.post(f"{base_url}/v1/catalogs", json=BANK_CATALOG, timeout=WAIT_S)
    assert catalog.status_code == 201, catalog.text
    created = httpx.post(f"{base_url}/v1/sessions", headers=headers or {}, timeout=WAIT_S,
                         json={"catalog": catalog.json()["id"], "task": "my balance"})
    assert created.status_code == 201, created.text
    session_id: str = created.json()["id"]
    deadline = time.monotonic() + WAIT_S
    while True:
        status = httpx.get(f"{base_url}/v1/sessions/{session_id}", timeout=WAIT_S).json()
        if status["status"] != "running":
            assert status["status"] == "done", status
            return session_id
        if time.monotonic() > deadline:
            raise TimeoutError(f"session {session_id} still running")
        time.sleep(0.05)


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[InMemorySpanExporter, str]]:
    exporter = InMemorySpanExporter()
    app = create_app(make_settings(tmp_path), engine=PlanEngine(BALANCE_PLAN),
                     telemetry=Telemetry.with_exporter(exporter))
    with serve(app) as base_url:
        yield exporter, base_url


def spans_when(exporter: InMemorySpanExporter, predicate: Any) -> list[Any]:
    """The finished spans once `predicate(spans)` holds (the session's last spans end in its
    worker thread, just after the status the test polled was saved)."""
    deadline = time.monotonic() + WAIT_S
    while not predicate(spans := list(exporter.get_finished_spans())):
        if time.monotonic() > deadline:
            raise TimeoutError(f"spans never matched; got {[s.name for s in spans]}")
        time.sleep(0.02)
    return spans


def test_a_session_is_a_tree_of_spans_under_the_callers_trace(
        traced: tuple[InMemorySpanExporter, str]) -> None:
    exporter, base_url = traced
    session_id = run_session(base_url, headers={"traceparent": TRACEPARENT})
    spans = spans_when(exporter, lambda s: any(x.name.startswith("invoke_agent") for x in s))
    by_id = {s.context.span_id: s for s in spans}

    def parent(span: Any) -> Any:
        return by_id.get(span.parent.span_id) if span.parent is not None else None

    (request,) = [s for s in spans if s.name == "POST /v1/sessions"]
    assert f"{request.context.trace_id:032x}" == TRACE_ID  # the caller's trace
    assert f"{request.parent.span_id:016x}" == CALLER_SPAN  # under the caller's span
    assert request.attributes["http.response.status_code"] == 201

    (session,) = [s for s in spans if s.name == "invoke_agent stackroute"]
    assert parent(session) is request  # the session hangs under the request that made it
    assert session.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert session.attributes["gen_ai.conversation.id"] == session_id
    assert session.attributes["gen_ai.request.model"] == "plan"
    assert session.attributes["stackroute.outcome"] == "done"
    assert session.attributes["gen_ai.usage.input_tokens"] > 0

    frames = {s.attributes["stackroute.node_path"]: s for s in spans
              if s.name.startswith("frame ")}
    assert set(frames) == {"", "payments"}
    assert parent(frames[""]) is session and parent(frames["payments"]) is frames[""]
    assert frames["payments"].attributes["stackroute.frame.outcome"] == "done"

    routing = [s for s in spans if s.attributes.get("stackroute.call") == "routing"]
    assert [(s.attributes["stackroute.node_path"], s.attributes["stackroute.choice"])
            for s in routing] == [("", "payments"), ("payments", "balance"),
                                  ("payments", "DONE"), ("", "DONE")]
    first = routing[0]
    assert parent(first) is frames[""] and first.name == "chat plan"
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "plan"
    assert first.attributes["gen_ai.system"] == "plan"
    assert first.attributes["gen_ai.usage.output_tokens"] == 1
    assert first.attributes["gen_ai.usage.input_tokens"] > 0
    assert first.attributes["stackroute.menu_size"] == 3  # payments, weather, DONE
    assert first.attributes["stackroute.choice_probability"] == pytest.approx(0.9)
    assert first.attributes["stackroute.cached_tokens"] == 7
    assert first.attributes["stackroute.speculation.accepted_levels"] == 0
    assert first.end_time - first.start_time == pytest.approx(1.5e6, rel=0.01)  # 1.5 ms

    (arguments,) = [s for s in spans if s.attributes.get("stackroute.call") == "arguments"]
    assert parent(arguments) is frames["payments"]
    assert arguments.attributes["gen_ai.tool.name"] == "balance"
    # balance has no parameters: its arguments are filled with no model call (value filling,
    # routing/arguments), so the arguments span carries no tokens and no values
    assert arguments.attributes["gen_ai.usage.output_tokens"] == 0
    assert arguments.attributes["stackroute.model_calls"] == 0
    assert arguments.attributes["stackroute.arguments.num_values"] == 0
    (balance,) = [s for s in routing if s.attributes["stackroute.choice"] == "balance"]
    assert balance.attributes["gen_ai.usage.output_tokens"] == 1  # its menu answer only
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.name == "execute_tool payments/balance"
    assert parent(tool) is frames["payments"]
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.call.id"] == f"{session_id}:0"
    assert {s.context.trace_id for s in spans  # the polling GETs are traces of their own
            if not s.name.startswith(("GET ", "POST /v1/catalogs"))} == {int(TRACE_ID, 16)}


def test_without_a_traceparent_each_request_starts_a_trace(
        traced: tuple[InMemorySpanExporter, str]) -> None:
    exporter, base_url = traced
    assert httpx.get(f"{base_url}/v1/models", timeout=WAIT_S,
                     headers={"traceparent": "not-a-trace"}).status_code == 200
    (span,) = spans_when(exporter, lambda s: any(x.name == "GET /v1/models" for x in s))
    assert span.parent is None and span.attributes["http.route"] == "/v1/models"



def test_the_remote_engine_forwards_the_trace_context(tmp_path: Path) -> None:
    """Front server (telemetry on) → RemoteEngine → upstream stackroute server (telemetry
    on): the upstream's request span is a child of the front request's span, in the
    caller's trace. With the front's telemetry off, the caller's traceparent goes through."""
    upstream_spans, front_spans = InMemorySpanExporter(), InMemorySpanExporter()
    upstream_app = create_app(make_settings(tmp_path / "up"), engine=RecordingEngine(),
                              telemetry=Telemetry.with_exporter(upstream_spans))
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    with serve(upstream_app) as upstream, RemoteEngine(base_url=upstream) as remote:
        front_app = create_app(make_settings(tmp_path / "front"), engine=remote,
                               telemetry=Telemetry.with_exporter(front_spans))
        with serve(front_app) as front:
            for stream in (False, True):
                r = httpx.post(f"{front}/v1/chat/completions", json={**body, "stream": stream},
                               headers={"traceparent": TRACEPARENT}, timeout=WAIT_S)
                assert r.status_code == 200, r.text
        fronts = [s for s in spans_when(front_spans, lambda s: len(
            [x for x in s if x.name == "POST /v1/chat/completions"]) == 2)
            if s.name == "POST /v1/chat/completions"]
        # each front request made two upstream calls (the token count, then the answer)
        ups = [s for s in spans_when(upstream_spans, lambda s: len(
            [x for x in s if x.name == "POST /v1/chat/completions"]) == 4)
            if s.name == "POST /v1/chat/completions"]
        assert {f"{s.context.trace_id:032x}" for s in fronts + ups} == {TRACE_ID}
        for front_span in fronts:
            children = [s for s in ups if s.parent.span_id == front_span.context.span_id]
            assert len(children) == 2

        untraced = create_app(make_settings(tmp_path / "plain"), engine=remote,
                              telemetry=Telemetry.disabled())
        with serve(untraced) as plain:
            r = httpx.post(f"{plain}/v1/chat/completions", json=body,
                           headers={"traceparent": TRACEPARENT}, timeout=WAIT_S)
            assert r.status_code == 200
        later = [s for s in spans_when(upstream_spans, lambda s: len(
            [x for x in s if x.name == "POST /v1/chat/completions"]) == 6)
            if s.name == "POST /v1/chat/completions"][4:]
        assert [f"{s.parent.span_id:016x}" for s in later] == [CALLER_SPAN] * 2  # unchanged


class UpstreamPlanEngine(PlanEngine):
    """The plan behind HTTP: a choice-constrained generation is the plan's choice with every
    option's log-probability, as the remote engine asks for a menu decision."""

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE:
            return generation_from_choice(self.choose(prompt, constraint.choices))
        if not isinstance(prompt, Prompt) or len(prompt.messages) < 2:  # a warm-up
            return Generation(text="{}", finish_reason="stop", usage=Usage(
                model_calls=1, prompt_tokens=self.count_tokens(prompt), generated_tokens=1))
        return super().generate(prompt, constraint=constraint, sampling=sampling)


def test_session_steps_on_a_remote_engine_forward_the_trace_context(tmp_path: Path) -> None:
    """Front server (a session on a remote engine) → upstream stackroute server: the routing
    calls and the argument generation a session step makes in its worker thread reach the
    upstream under the span of the frame the step runs in, in the caller's trace."""
    upstream_spans, front_spans = InMemorySpanExporter(), InMemorySpanExporter()
    upstream_app = create_app(make_settings(tmp_path / "up"),
                              engine=UpstreamPlanEngine(BALANCE_PLAN),
                              telemetry=Telemetry.with_exporter(upstream_spans))
    with serve(upstream_app) as upstream, RemoteEngine(base_url=upstream) as remote:
        front_app = create_app(make_settings(tmp_path / "front"), engine=remote,
                               telemetry=Telemetry.with_exporter(front_spans))
        with serve(front_app) as front:
            run_session(front, headers={"traceparent": TRACEPARENT})
        fronts = spans_when(front_spans, lambda s: any(
            x.name == "invoke_agent stackroute" for x in s))
        frames = {s.attributes["stackroute.node_path"]: s for s in fronts
                  if s.name.startswith("frame ")}
        (request,) = [s for s in fronts if s.name == "POST /v1/sessions"]
        routing = [s for s in fronts if s.attributes.get("stackroute.call") == "routing"]
        # one completion per routing call, one for the arguments, and token counts
        ups = spans_when(upstream_spans, lambda s: len(
            [x for x in s if x.name == "POST /v1/chat/completions"
             and x.parent is not None and x.parent.span_id in {
                 f.context.span_id for f in frames.values()}]) >= len(routing) + 1)
    traced = [s for s in ups if s.name == "POST /v1/chat/completions"
              and s.context.trace_id == int(TRACE_ID, 16)]
    parents = [s.parent.span_id for s in traced]
    # every upstream call in the caller's trace: from the request that created the session
    # (its prompt check) or from a step, under the frame that step ran in
    assert set(parents) <= {request.context.span_id} | {f.context.span_id
                                                         for f in frames.values()}
    by_frame = {path: parents.count(frame.context.span_id) for path, frame in frames.items()}
    # the root: a choice on the way down and DONE on the way up; payments: a choice, the
    # arguments, DONE (each routing step's prompt check may add a token count)
    assert by_frame[""] >= 2 and by_frame["payments"] >= 3, by_frame
    untraced = [s for s in ups if s.name == "POST /v1/chat/completions"
                and s.context.trace_id != int(TRACE_ID, 16)]
    assert all(s.parent is None for s in untraced)  # the catalog's warm-up only


def test_a_route_call_is_a_span_under_its_request(
        traced: tuple[InMemorySpanExporter, str]) -> None:
    exporter, base_url = traced
    catalog = httpx.post(f"{base_url}/v1/catalogs", json=BANK_CATALOG, timeout=WAIT_S).json()
    r = httpx.post(f"{base_url}/v1/route", headers={"traceparent": TRACEPARENT},
                   json={"catalog": catalog["id"], "query": "my balance"}, timeout=WAIT_S)
    assert r.status_code == 200, r.text
    spans = spans_when(exporter, lambda s: any(x.name == "POST /v1/route" for x in s))
    (request,) = [s for s in spans if s.name == "POST /v1/route"]
    (call,) = [s for s in spans if s.attributes.get("stackroute.call") == "routing"]
    assert call.parent.span_id == request.context.span_id
    assert f"{call.context.trace_id:032x}" == TRACE_ID
    assert call.attributes["stackroute.choice"] == "payments"
    assert call.attributes["stackroute.menu_size"] == 3


def plan_engine(**_: Any) -> PlanEngine:
    """`--engine test_telemetry:plan_engine` for the CLI test."""
    return PlanEngine(BALANCE_PLAN)


def test_stackroute_run_exports_its_trace(tmp_path: Path, receiver: tuple[str, list[bytes]],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`stackroute run` with an endpoint in the environment: its run's spans, under
    `$TRACEPARENT`, reach the receiver before the command returns."""
    import json

    from stackroute.server.cli import app as cli
    from typer.testing import CliRunner

    url, received = receiver
    catalog = tmp_path / "bank.json"
    catalog.write_text(json.dumps(BANK_CATALOG), encoding="utf-8")
    monkeypatch.setenv("STACKROUTE_OTLP_ENDPOINT", url)
    monkeypatch.setenv("TRACEPARENT", TRACEPARENT)
    result = CliRunner().invoke(cli, ["run", str(catalog), "my balance", "--engine",
                                      "test_telemetry:plan_engine", "--no-speculation",
                                      "--json"])
    assert result.exit_code == 0, result.output
    spans = decoded_spans(received)
    names = {s.name for s in spans}
    assert {"invoke_agent stackroute", "frame <root>", "frame payments", "chat plan",
            "execute_tool payments/balance"} <= names
    assert {s.trace_id.hex() for s in spans} == {TRACE_ID}
    (session,) = [s for s in spans if s.name == "invoke_agent stackroute"]
    assert session.parent_span_id.hex() == CALLER_SPAN


# -- a real OTLP/HTTP receiver ------------------------------------------------------------------
class _Receiver(BaseHTTPRequestHandler):
    requests: list[bytes]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path == "/v1/traces" \
                and self.headers.get("Content-Type") == "application/x-protobuf":
            self.server.received.append(body)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[bytes]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.received  # type: ignore
    finally:
        server.shutdown()
        server.server_close()


def decoded_spans(received: list[bytes]) -> list[Any]:
    """Every span of the `ExportTraceServiceRequest`s the receiver got (protobuf)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans = []
    for body in received:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            assert service["service.name"] == "stackroute"
            for scope_spans in resource_spans.scope_spans:
                spans += list(scope_spans.spans)
    return spans


def test_spans_reach_an_otlp_http_receiver(tmp_path: Path, receiver: tuple[str, list[bytes]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url, received = receiver
    monkeypatch.setenv("STACKROUTE_OTLP_ENDPOINT", url)
    app = create_app(make_settings(tmp_path), engine=PlanEngine(BALANCE_PLAN))
    with serve(app) as base_url:  # the app's own exporter: flushed when the app stops
        session_id = run_session(base_url, headers={"traceparent": TRACEPARENT})
        time.sleep(0.2)  # the session's last spans end in its worker, after the status
    spans = decoded_spans(received)

    def attributes(span: Any) -> dict[str, Any]:
        return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}

    names = [s.name for s in spans]
    assert "invoke_agent stackroute" in names and "execute_tool payments/balance" in names
    assert {s.trace_id.hex() for s in spans  # the session's, and the request that made it
            if not s.name.startswith(("GET ", "POST /v1/catalogs"))} == {TRACE_ID}
    session = attributes(next(s for s in spans if s.name == "invoke_agent stackroute"))
    assert session["gen_ai.conversation.id"] == session_id
    routing = [attributes(s) for s in spans if s.name == "chat plan"]
    routing = [a for a in routing if a["stackroute.call"] == "routing"]
    assert len(routing) == 4
    for a in routing:
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "plan"
        assert a["gen_ai.system"] == "plan"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] >= 1
        assert a["stackroute.menu_size"] >= 2 and a["stackroute.choice"]
        assert a["stackroute.choice_probability"] == pytest.approx(0.9)
        assert a["stackroute.cached_tokens"] == 7


# -- off by default --------------------------------------------------------------------------------
def test_no_endpoint_no_sdk(tmp_path: Path) -> None:
    """Without an endpoint the app imports neither the SDK nor an exporter."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("STACKROUTE_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")}
    code = ("import sys\n"
            "from stackroute.server.http.app import create_app\n"
            "from stackroute.server.settings import ServerSettings\n"
            f"create_app(ServerSettings(db={str(tmp_path / 'x.db')!r}))\n"
            "loaded = [m for m in sys.modules if m.startswith(('opentelemetry.sdk', "
            "'opentelemetry.exporter'))]\n"
            "assert not loaded, loaded\n")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, None),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces"),
    ({"STACKROUTE_OTLP_ENDPOINT": "http://ours:4318/v1/traces",
      "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://ours:4318/v1/traces"),
])
def test_the_endpoint_comes_from_the_environment(environ: dict[str, str],
                                                 expected: str | None) -> None:
    assert otlp_traces_url(environ) == expected


def test_a_malformed_endpoint_is_refused() -> None:
    from stackroute.runtime.errors import InputError

    with pytest.raises(InputError, match="must be an http"):
        otlp_traces_url({"STACKROUTE_OTLP_ENDPOINT": "collector:4318"})


def test_doctests() -> None:
    import doctest

    import stackroute.server.telemetry as telemetry

    result = doctest.testmod(telemetry)
    assert result.attempted > 0 and result.failed == 0


def route_event(detail: dict[str, Any],
                arguments_call: ArgumentsCall | None = None) -> TraceEvent:
    """A ROUTE to a leaf: 2 calls together (the routing choice, then the arguments)."""
    return TraceEvent(arguments_call=arguments_call,
        seq=3, kind=EventKind.ROUTE, frame_id=1, parent_id=0, path="payments", depth=1,
        menu=("balance", "transfer", "DONE"), decision="balance", arguments={"account": "a"},
        probabilities={"balance": 0.8, "transfer": 0.1, "DONE": 0.1},
        usage={"model_calls": 2, "prompt_tokens": 120, "prefill_tokens": 40,
               "cached_tokens": 80, "generated_tokens": 14, "latency_ms": 30.0},
        detail={"policy": "plain", **detail},
        time_unix=1_000.0)


def test_the_argument_generation_span_carries_its_own_tokens() -> None:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry.with_exporter(exporter)
    arguments_usage = Usage(model_calls=1, prompt_tokens=70, prefill_tokens=10,
                            cached_tokens=60, generated_tokens=12, forward_passes=6,
                            latency_ms=20.0)
    tokens = routing_call_spans(telemetry.tracer, route_event({}, ArgumentsCall(
        usage=arguments_usage, finish_reason="stop", fallback="required_only")),
        model="m", system="s")
    routing, arguments = exporter.get_finished_spans()
    assert arguments.attributes["stackroute.call"] == "arguments"
    assert {k: arguments.attributes[k] for k in (
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "stackroute.cached_tokens",
        "stackroute.prefill_tokens", "stackroute.model_calls", "stackroute.forward_passes",
        "stackroute.policy", "stackroute.arguments_fallback")} == {
        "gen_ai.usage.input_tokens": 70, "gen_ai.usage.output_tokens": 12,
        "stackroute.cached_tokens": 60, "stackroute.prefill_tokens": 10,
        "stackroute.model_calls": 1, "stackroute.forward_passes": 6,
        "stackroute.policy": "plain", "stackroute.arguments_fallback": "required_only"}
    # the routing call keeps the rest; the run's totals count both once
    assert {k: routing.attributes[k] for k in (
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "stackroute.cached_tokens",
        "stackroute.prefill_tokens", "stackroute.model_calls")} == {
        "gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 2,
        "stackroute.cached_tokens": 20, "stackroute.prefill_tokens": 30,
        "stackroute.model_calls": 1}
    assert tokens == {"input": 120, "output": 14, "cached": 80}
    assert routing.end_time == arguments.start_time  # the arguments follow the choice


def test_without_the_arguments_usage_every_token_stays_on_the_routing_span() -> None:
    exporter = InMemorySpanExporter()
    routing_call_spans(Telemetry.with_exporter(exporter).tracer, route_event({}),
                       model="m", system="s")
    routing, arguments = exporter.get_finished_spans()
    assert routing.attributes["gen_ai.usage.input_tokens"] == 120
    assert routing.attributes["gen_ai.usage.output_tokens"] == 14
    assert "gen_ai.usage.input_tokens" not in arguments.attributes  # unknown, not zero


def test_the_arguments_span_says_how_each_value_was_filled() -> None:
    """Value filling (routing/arguments) records each property's source in the decision's
    detail; the arguments span names them, counts the model's value choices, and leaves the
    values (the caller's data) out."""
    exporter = InMemorySpanExporter()
    choices = [{"name": "account", "source": "model", "num_candidates": 3, "value": "a",
                "probability": 0.7},
               {"name": "note", "source": "omitted", "num_candidates": 0}]
    routing_call_spans(Telemetry.with_exporter(exporter).tracer, route_event(
        {"value_choices": choices}, ArgumentsCall(usage=Usage(model_calls=1, generated_tokens=1),
                                                  finish_reason="stop")),
        model="m", system="s")
    routing, arguments = exporter.get_finished_spans()
    assert arguments.attributes["stackroute.arguments.num_values"] == 2
    assert list(arguments.attributes["stackroute.arguments.value_sources"]) == [
        "account=model", "note=omitted"]
    assert arguments.attributes["stackroute.arguments.model_choices"] == 1
    assert "a" not in [str(v) for v in arguments.attributes.values()]
    assert "stackroute.arguments.num_values" not in routing.attributes


def test_a_call_waiting_for_values_is_an_event_and_its_tool_span_starts_when_given() -> None:
    from stackroute.runtime.catalog import build_tree
    from stackroute.runtime.decision import Decision
    from stackroute.runtime.machine import StackMachine
    from stackroute.server.telemetry_spans import export_run

    class Asks:
        def route(self, request: Any) -> Decision:
            if request.step == 0:
                return Decision(choice="weather", arguments={}, missing_values=("city",))
            return Decision(choice="DONE")

    tree = build_tree({"name": "t", "children": [{
        "name": "weather", "description": "Weather for a city.", "handler": None,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}]})
    clock = iter(range(1_000, 2_000))
    machine = StackMachine(tree, Asks(), clock=lambda: float(next(clock)))  # type: ignore[arg-type]
    machine.executor.handlers.bind("weather", lambda city: {"city": city})  # type: ignore[attr-defined]
    state = machine.run(machine.start("weather please", run_id="r"))
    assert state.pending is not None
    machine.supply(state, state.pending.digest, {"city": "Oslo"})
    machine.run(state)
    supplied = next(e for e in state.trace if e.kind is EventKind.VALUES_SUPPLY)
    exporter = InMemorySpanExporter()
    export_run(Telemetry.with_exporter(exporter).tracer, state.trace, run_id="r", model="m",
               system="s")
    spans = exporter.get_finished_spans()
    events = [ev.name for span in spans for ev in span.events]
    assert "values_pause" in events and "values_supply" in events
    [tool] = [s for s in spans if s.name == "execute_tool weather"]
    assert tool.start_time == int(supplied.time_unix * 1_000_000_000)  # not the pause's time
