"""OpenTelemetry traces, exported over OTLP/HTTP — or nothing at all.

Export is on when `STACKROUTE_OTLP_ENDPOINT` (or the standard `OTEL_EXPORTER_OTLP_ENDPOINT`)
is set: a collector's base URL (`http://collector:4318`; `/v1/traces` is appended unless it is
already there). Unset, `Telemetry.from_environ` returns a disabled instance and no OpenTelemetry
module is imported: the SDK and the exporter are the optional extra `stackroute[otel]`.

Spans come from two places: `http/middleware.py` opens one server span per HTTP request, as a
child of the caller's `traceparent`; `telemetry_spans.py` turns a run's trace events (the
runtime's `TraceEvent`s, which know nothing of OpenTelemetry) into the spans session → frame →
routing call / argument generation / leaf call. One `Telemetry` per process owns its own
tracer provider (no global provider is installed). What is sampled is the operator's choice
(`operator_sampler`), not the caller's `traceparent` flags.

>>> Telemetry.from_environ({}).is_enabled
False
>>> otlp_traces_url({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
'http://collector:4318/v1/traces'
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from stackroute.runtime.errors import InputError

log = logging.getLogger(__name__)

ENDPOINT_ENV = "STACKROUTE_OTLP_ENDPOINT"
STANDARD_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
SERVICE_NAME = "stackroute"
TRACER_NAME = "stackroute"


class TelemetryUnavailableError(InputError):
    """An OTLP endpoint is set but the optional packages are not installed."""

    code = "telemetry_unavailable"


def otlp_traces_url(environ: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP traces URL the environment asks for, or None (export off)."""
    base = (environ.get(ENDPOINT_ENV) or environ.get(STANDARD_ENDPOINT_ENV) or "").strip()
    if not base:
        return None
    if not base.startswith(("http://", "https://")):
        raise InputError(f"{ENDPOINT_ENV}/{STANDARD_ENDPOINT_ENV} must be an http(s) URL "
                         f"(an OTLP/HTTP collector, e.g. http://localhost:4318); got {base!r}")
    base = base.rstrip("/")
    return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


class Telemetry:
    """A tracer over its own provider, or disabled (`tracer` is None). Thread-safe."""

    def __init__(self, provider: Any | None = None) -> None:
        self._provider = provider
        self.tracer: Any | None = None if provider is None else provider.get_tracer(TRACER_NAME)

    @property
    def is_enabled(self) -> bool:
        return self.tracer is not None

    @classmethod
    def disabled(cls) -> Telemetry:
        return cls(None)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, *,
                     service_name: str = SERVICE_NAME) -> Telemetry:
        """Export over OTLP/HTTP when the environment names an endpoint; else disabled."""
        url = otlp_traces_url(os.environ if environ is None else environ)
        if url is None:
            return cls.disabled()
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as error:
            raise TelemetryUnavailableError(
                f"{ENDPOINT_ENV} is set ({url}) but OpenTelemetry is not installed: pip "
                "install 'stackroute[otel]'") from error
        log.info("exporting traces over OTLP/HTTP to %s", url)
        return cls.with_exporter(OTLPSpanExporter(endpoint=url), service_name=service_name,
                                 is_batched=True)

    @classmethod
    def with_exporter(cls, exporter: Any, *, service_name: str = SERVICE_NAME,
                      is_batched: bool = False) -> Telemetry:
        """Spans to `exporter` (the SDK's `InMemorySpanExporter` in tests): one at a time as
        they end, or batched in a background thread (`is_batched`, for a network exporter)."""
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": service_name}),
                                  sampler=operator_sampler(os.environ))
        processor = BatchSpanProcessor(exporter) if is_batched else SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
        return cls(provider)

    def force_flush(self, timeout_ms: int = 10_000) -> bool:
        return bool(self._provider.force_flush(timeout_ms)) if self._provider else True

    def shutdown(self) -> None:
        """Export what is left and stop (idempotent)."""
        if self._provider is not None:
            provider, self._provider, self.tracer = self._provider, None, None
            provider.shutdown()


SAMPLER_ENV = "OTEL_TRACES_SAMPLER"
SAMPLER_ARG_ENV = "OTEL_TRACES_SAMPLER_ARG"


def operator_sampler(environ: Mapping[str, str]) -> Any:
    """The sampler the operator chose, never the client: every request is traced unless
    `OTEL_TRACES_SAMPLER` says otherwise, and a caller's `traceparent` flags (`-00`: "not
    sampled") never turn tracing off: that was audit evasion. The `parentbased_*` names mean
    their root sampler here: the sampling decision is made once, by this server.

    >>> operator_sampler({}).get_description()
    'AlwaysOnSampler'
    >>> operator_sampler({"OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
    ...                   "OTEL_TRACES_SAMPLER_ARG": "0.25"}).get_description()
    'TraceIdRatioBased{0.25}'
    """
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, TraceIdRatioBased

    name = environ.get(SAMPLER_ENV, "").strip().lower().removeprefix("parentbased_")
    if name in ("", "always_on"):
        return ALWAYS_ON
    if name == "always_off":
        return ALWAYS_OFF
    if name == "traceidratio":
        try:
            ratio = float(environ.get(SAMPLER_ARG_ENV, "1.0"))
        except ValueError:
            ratio = -1.0
        if not 0.0 <= ratio <= 1.0:
            raise InputError(f"{SAMPLER_ARG_ENV} must be a ratio from 0 to 1; got "
                             f"{environ.get(SAMPLER_ARG_ENV)!r}")
        return TraceIdRatioBased(ratio)
    raise InputError(f"{SAMPLER_ENV} must be always_on, always_off or traceidratio (or their "
                     f"parentbased_ names); got {environ.get(SAMPLER_ENV)!r}")


def context_from_traceparent(traceparent: str | None) -> Any:
    """The OpenTelemetry context whose parent is `traceparent` (the current context when
    None or malformed). Only for an enabled `Telemetry`: it imports OpenTelemetry."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": traceparent} if traceparent else {}
    return TraceContextTextMapPropagator().extract(carrier)


def traceparent_of(span: Any) -> str:
    """The `traceparent` header value that names `span` as the parent."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
