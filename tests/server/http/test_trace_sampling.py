"""Issue 28.8 (tracing): a caller's `traceparent` with flags `00` ("not sampled") turned off
tracing of its requests and of the sessions they started: audit evasion. The sampling
decision is the operator's (`operator_sampler`); the caller's trace id is still the parent."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from doubles import PlanEngine
from live_server import serve
from routing_app_kit import make_settings
from stackroute.runtime.errors import InputError
from stackroute.server.http.app import create_app
from stackroute.server.telemetry import Telemetry, operator_sampler
from test_telemetry import BALANCE_PLAN, TRACE_ID, run_session, spans_when

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

UNSAMPLED = f"00-{TRACE_ID}-b7ad6b7169203331-00"


def test_a_caller_cannot_switch_tracing_off(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    app = create_app(make_settings(tmp_path), engine=PlanEngine(BALANCE_PLAN),
                     telemetry=Telemetry.with_exporter(exporter))
    with serve(app) as base_url:
        run_session(base_url, headers={"traceparent": UNSAMPLED})
        routed = httpx.post(f"{base_url}/v1/route", headers={"traceparent": UNSAMPLED},
                            json={"catalog": httpx.get(f"{base_url}/v1/catalogs").json()[
                                "catalogs"][0]["id"], "query": "my balance"})
        assert routed.status_code == 200, routed.text
        spans = spans_when(exporter, lambda s: any(
            x.name == "invoke_agent stackroute" for x in s) and any(
            x.name == "POST /v1/route" for x in s))
    (request,) = [s for s in spans if s.name == "POST /v1/sessions"]
    assert f"{request.context.trace_id:032x}" == TRACE_ID  # still the caller's trace
    assert request.context.trace_flags.sampled
    (session,) = [s for s in spans if s.name == "invoke_agent stackroute"]
    assert session.context.trace_id == request.context.trace_id
    assert any(s.name.startswith("execute_tool") for s in spans)


@pytest.mark.parametrize(("environ", "description"), [
    ({}, "AlwaysOnSampler"),
    ({"OTEL_TRACES_SAMPLER": "parentbased_always_on"}, "AlwaysOnSampler"),
    ({"OTEL_TRACES_SAMPLER": "always_off"}, "AlwaysOffSampler"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"},
     "TraceIdRatioBased{0.5}"),
])
def test_the_operator_chooses_the_sampler(environ: dict[str, str], description: str) -> None:
    sampler = operator_sampler(environ)
    assert sampler.get_description() == description
    assert "ParentBased" not in sampler.get_description()  # a caller's flags never decide


@pytest.mark.parametrize("environ", [{"OTEL_TRACES_SAMPLER": "jaeger_remote"},
                                     {"OTEL_TRACES_SAMPLER": "traceidratio",
                                      "OTEL_TRACES_SAMPLER_ARG": "2"}])
def test_a_sampler_this_server_cannot_apply_is_refused(environ: dict[str, str]) -> None:
    with pytest.raises(InputError, match="OTEL_TRACES_SAMPLER"):
        operator_sampler(environ)
