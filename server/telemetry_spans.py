"""A run's trace events as OpenTelemetry spans: session → frame → routing call / argument
generation / leaf call, with the GenAI semantic-convention attributes and ours.

The runtime records every transition as a `TraceEvent` (with its time and, for a routing call,
its usage and latency) and knows nothing of OpenTelemetry; `RunSpans` reads those events as
they are saved and builds spans with the events' own timestamps:

- session `invoke_agent stackroute` (START … FINISH/CANCEL): `gen_ai.operation.name`
  `invoke_agent`, `gen_ai.conversation.id` (the run id), `gen_ai.request.model`,
  `gen_ai.system`, the run's summed `gen_ai.usage.*`, `stackroute.outcome`;
- frame `frame PATH` (START/PUSH … POP_DONE/POP_BACK): `stackroute.node_path`, `frame_id`,
  `depth`, `frame.outcome`;
- routing call `chat MODEL` (a ROUTE event, over its latency): `gen_ai.operation.name=chat`,
  `gen_ai.usage.input_tokens`/`output_tokens`, `stackroute.call=routing`, `menu_size`,
  `choice`, `choice_probability`, `cached_tokens`, `prefill_tokens`,
  `speculation.accepted_levels`, `policy`;
- argument generation `chat MODEL` (the tail of a ROUTE to a leaf, its
  `arguments_latency_ms`): `stackroute.call=arguments`, `gen_ai.tool.name`, finish reason;
- leaf call `execute_tool LEAF` (LEAF_PENDING or its approval … LEAF_RESULT):
  `gen_ai.operation.name=execute_tool`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, and an
  error status when the leaf failed.

Gates, alerts, missteps and limits are span events on their frame. A routing call's usage
covers its argument generation too (one `Decision`), so the token counts sit on the routing
span. A run resumed by another process starts a new session span there
(`stackroute.resumed=true`) under the same conversation id.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.server.telemetry import Telemetry, context_from_traceparent

log = logging.getLogger(__name__)

_NS = 1_000_000_000
_SPAN_EVENTS = {EventKind.GATE_PAUSE, EventKind.GATE_APPROVE, EventKind.GATE_REJECT,
                EventKind.ALERT, EventKind.MISSTEP, EventKind.LIMIT, EventKind.CANCEL}
_ENDS = {EventKind.FINISH, EventKind.CANCEL}


def _ns(seconds: float) -> int:
    return int(seconds * _NS)


class RunSpans:
    """One run's spans, built event by event (`add`), ended at the run's end or `close`."""

    def __init__(self, tracer: Any, *, run_id: str, model: str, system: str,
                 parent: Any = None) -> None:
        self.tracer = tracer
        self.run_id = run_id
        self.model = model
        self.system = system
        self.parent = parent  # an OpenTelemetry context (the request that started the run)
        self.session: Any | None = None
        self.frames: dict[int, Any] = {}
        self.tool_starts: dict[str, float] = {}  # call id → when it could start running
        self.usage: dict[str, int] = {"input": 0, "output": 0, "cached": 0}
        self.is_ended = False

    def add(self, events: Iterable[TraceEvent]) -> None:
        for event in events:
            if not self.is_ended:
                self._add(event)

    def close(self, end_s: float, outcome: str | None = None) -> None:
        """End every open span at `end_s` (the run's end; or a paused run's when the service
        stops, with no outcome)."""
        for span in reversed(list(self.frames.values())):
            span.end(end_time=_ns(end_s))
        self.frames.clear()
        self._end_session(end_s, outcome=outcome)
        self.is_ended = True

    # -- one event ------------------------------------------------------------------------------
    def _add(self, e: TraceEvent) -> None:
        from opentelemetry import trace

        if self.session is None:
            self._start_session(e)
        if e.kind in (EventKind.START, EventKind.PUSH):
            self._frame(e.frame_id, e, parent_id=e.parent_id)
        elif e.kind is EventKind.ROUTE:
            self._route(e)
        elif e.kind is EventKind.LEAF_PENDING:
            self.tool_starts[str(e.detail.get("call_id"))] = e.time_unix
        elif e.kind is EventKind.LEAF_RESULT:
            self._leaf(e)
        elif e.kind in (EventKind.POP_DONE, EventKind.POP_BACK):
            span = self._frame(e.frame_id, e, parent_id=e.parent_id)
            span.set_attribute("stackroute.frame.outcome", e.kind.value.removeprefix("pop_"))
            span.end(end_time=_ns(e.time_unix))
            self.frames.pop(e.frame_id or 0, None)
        if e.kind in _SPAN_EVENTS:
            if e.kind is EventKind.GATE_APPROVE:
                self.tool_starts[str(e.detail.get("call_id"))] = e.time_unix
            target = self.frames.get(e.frame_id or 0, self.session)
            attributes = {"stackroute.node_path": e.path}
            if e.error:
                attributes["stackroute.error"] = e.error
            target.add_event(e.kind.value, attributes=attributes, timestamp=_ns(e.time_unix))
        if e.kind in _ENDS:
            outcome = str(e.detail.get("status", e.kind.value))
            if e.kind is EventKind.CANCEL:
                self.session.set_status(trace.Status(trace.StatusCode.ERROR, "cancelled"))
            self.close(e.time_unix, outcome)

    def _start_session(self, e: TraceEvent) -> None:
        self.session = self.tracer.start_span(
            "invoke_agent stackroute", context=self.parent, start_time=_ns(e.time_unix),
            attributes={"gen_ai.operation.name": "invoke_agent",
                        "gen_ai.agent.name": "stackroute",
                        "gen_ai.conversation.id": self.run_id,
                        "gen_ai.request.model": self.model,
                        "gen_ai.system": self.system, "gen_ai.provider.name": self.system,
                        "stackroute.resumed": e.kind is not EventKind.START})

    def _end_session(self, end_s: float, *, outcome: str | None) -> None:
        if self.session is None:
            return
        self.session.set_attributes({
            "gen_ai.usage.input_tokens": self.usage["input"],
            "gen_ai.usage.output_tokens": self.usage["output"],
            "stackroute.cached_tokens": self.usage["cached"]})
        if outcome is not None:
            self.session.set_attribute("stackroute.outcome", outcome)
        self.session.end(end_time=_ns(end_s))

    def _context(self, span: Any) -> Any:
        from opentelemetry import trace

        return trace.set_span_in_context(span)

    def _frame(self, frame_id: int | None, e: TraceEvent, *, parent_id: int | None) -> Any:
        """The frame's open span, started now if this is the first event of it seen."""
        key = frame_id or 0
        span = self.frames.get(key)
        if span is None:
            parent = self.frames.get(parent_id) if parent_id is not None else None
            span = self.tracer.start_span(
                f"frame {e.path or '<root>'}", context=self._context(parent or self.session),
                start_time=_ns(e.time_unix),
                attributes={"stackroute.node_path": e.path, "stackroute.frame_id": key,
                            "stackroute.depth": e.depth})
            self.frames[key] = span
        return span

    def _route(self, e: TraceEvent) -> None:
        frame = self._frame(e.frame_id, e, parent_id=e.parent_id)
        usage = routing_call_spans(self.tracer, e, model=self.model, system=self.system,
                                   parent=self._context(frame))
        for key, value in usage.items():
            self.usage[key] += value

    def _leaf(self, e: TraceEvent) -> None:
        from opentelemetry import trace

        call_id = str(e.detail.get("call_id"))
        leaf = str(e.detail.get("leaf", e.path))
        start_s = self.tool_starts.pop(call_id, e.time_unix)
        span = self.tracer.start_span(
            f"execute_tool {leaf}",
            context=self._context(self._frame(e.frame_id, e, parent_id=e.parent_id)),
            start_time=_ns(start_s),
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": leaf,
                        "gen_ai.tool.type": "function", "gen_ai.tool.call.id": call_id,
                        "stackroute.node_path": leaf,
                        "stackroute.is_replayed": bool(e.detail.get("is_replayed"))})
        if e.error:
            span.set_attribute("error.type", "leaf_error")
            span.set_status(trace.Status(trace.StatusCode.ERROR, e.error[:200]))
        span.end(end_time=_ns(e.time_unix))



def routing_call_spans(tracer: Any, e: TraceEvent, *, model: str, system: str,
                       parent: Any = None) -> dict[str, int]:
    """A ROUTE event as its routing call span (and, for a leaf, the argument generation
    span after it), under `parent` (None: the current context, e.g. `/v1/route`'s request
    span). Returns its tokens: {"input", "output", "cached"}."""
    usage: Mapping[str, Any] = e.usage or {}
    detail = e.detail
    end_s = e.time_unix
    total_s = float(usage.get("latency_ms") or 0.0) / 1e3
    arguments_s = float(detail.get("arguments_latency_ms") or 0.0) / 1e3 \
        if e.arguments is not None else 0.0
    probabilities = e.probabilities or {}
    tokens = {"input": int(usage.get("prompt_tokens") or 0),
              "output": int(usage.get("generated_tokens") or 0),
              "cached": int(usage.get("cached_tokens") or 0)}
    model_attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                        "gen_ai.system": system, "gen_ai.provider.name": system}
    attributes = {**model_attributes, "stackroute.call": "routing",
                  "stackroute.node_path": e.path,
                  "stackroute.menu_size": len(e.menu or ()),
                  "stackroute.choice": e.decision or "",
                  "gen_ai.usage.input_tokens": tokens["input"],
                  "gen_ai.usage.output_tokens": tokens["output"],
                  "stackroute.cached_tokens": tokens["cached"],
                  "stackroute.prefill_tokens": int(usage.get("prefill_tokens") or 0),
                  "stackroute.model_calls": int(usage.get("model_calls") or 0),
                  "stackroute.speculation.accepted_levels":
                      int(usage.get("accepted_levels") or 0)}
    if e.decision in probabilities:
        attributes["stackroute.choice_probability"] = float(probabilities[e.decision])
    if "policy" in detail:
        attributes["stackroute.policy"] = str(detail["policy"])
    span = tracer.start_span(f"chat {model}", context=parent,
                             start_time=_ns(end_s - total_s), attributes=attributes)
    span.end(end_time=_ns(end_s - arguments_s))
    if e.arguments is not None:
        arguments = tracer.start_span(
            f"chat {model}", context=parent, start_time=_ns(end_s - arguments_s),
            attributes={**model_attributes, "stackroute.call": "arguments",
                        "stackroute.node_path": e.path, "gen_ai.tool.name": e.decision or "",
                        "gen_ai.response.finish_reasons":
                            [str(detail.get("arguments_finish_reason", ""))],
                        "stackroute.forward_passes":
                            int(detail.get("arguments_forward_passes") or 0)})
        arguments.end(end_time=_ns(end_s))
    return tokens


class SessionTracing:
    """Spans for the service's sessions: `on_saved(run_id, events)` after each saved
    transition (from any thread). The first call for a run captures the current
    OpenTelemetry context as the session span's parent: the HTTP request that created it."""

    def __init__(self, tracer: Any, *, model: str, system: str) -> None:
        self.tracer = tracer
        self.model = model
        self.system = system
        self._lock = threading.Lock()
        self._runs: dict[str, RunSpans] = {}

    def on_saved(self, run_id: str, events: Sequence[TraceEvent]) -> None:
        from opentelemetry import context

        if not events:
            return
        with self._lock:
            spans = self._runs.get(run_id)
            if spans is None:
                spans = self._runs[run_id] = RunSpans(
                    self.tracer, run_id=run_id, model=self.model, system=self.system,
                    parent=context.get_current())
            try:
                spans.add(events)
            except Exception:  # telemetry never fails a session; our bug, in the log
                log.exception("spans for session %s failed; its tracing stops", run_id)
                spans.is_ended = True
            if spans.is_ended:
                del self._runs[run_id]

    def close(self, end_s: float) -> None:
        with self._lock:
            for spans in self._runs.values():
                spans.close(end_s)
            self._runs.clear()


def export_run(tracer: Any, events: Sequence[TraceEvent], *, run_id: str, model: str,
               system: str, parent: Any = None) -> None:
    """A whole recorded run as spans at once (`stackroute run`, `/v1/route`)."""
    spans = RunSpans(tracer, run_id=run_id, model=model, system=system, parent=parent)
    spans.add(events)
    if not spans.is_ended and events:
        spans.close(max(e.time_unix for e in events))


def export_from_environ(events: Sequence[TraceEvent], *, run_id: str, model: str,
                        system: str) -> bool:
    """`stackroute run`'s trace as spans, when the environment names an OTLP endpoint (under
    `$TRACEPARENT` when set, as CI tools pass trace context to a command); exported before
    this returns. False when export is off."""
    telemetry = Telemetry.from_environ()
    if telemetry.tracer is None:
        return False
    try:
        export_run(telemetry.tracer, events, run_id=run_id, model=model, system=system,
                   parent=context_from_traceparent(os.environ.get("TRACEPARENT")))
    finally:
        telemetry.shutdown()
    return True
