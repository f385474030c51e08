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
- argument generation `chat MODEL` (the tail of a ROUTE to a leaf, over the latency of its
  `TraceEvent.arguments_call`): `stackroute.call=arguments`, `gen_ai.tool.name`, finish
  reason, forward passes, and its own `gen_ai.usage.*`, cached, prefill and model-call
  counts;
- leaf call `execute_tool LEAF` (LEAF_PENDING or its approval … LEAF_RESULT):
  `gen_ai.operation.name=execute_tool`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, and an
  error status when the leaf failed.

Gates, alerts, missteps and limits are span events on their frame. A routing call's usage
covers its argument generation too (one `Decision`); where the argument generation's own
usage is recorded, it is split off onto that span, else every token sits on the routing span.
A session step's engine calls forward the trace context of its frame's span
(`SessionTracing.traceparent`), so a remote engine's server spans join the run's trace. A run
resumed by another process starts a new session span there
(`stackroute.resumed=true`) under the same conversation id.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.server.telemetry import Telemetry, context_from_traceparent, traceparent_of

log = logging.getLogger(__name__)

_NS = 1_000_000_000
_SPAN_EVENTS = {EventKind.GATE_PAUSE, EventKind.GATE_APPROVE, EventKind.GATE_REJECT,
                EventKind.VALUES_PAUSE, EventKind.VALUES_SUPPLY,
                EventKind.ALERT, EventKind.MISSTEP, EventKind.LIMIT, EventKind.CANCEL}
# a paused call can start running from here (a later gate's approval moves it on again)
_RELEASES = {EventKind.GATE_APPROVE, EventKind.VALUES_SUPPLY}
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

        session = self.session if self.session is not None else self._start_session(e)
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
            if e.kind in _RELEASES:
                self.tool_starts[str(e.detail.get("call_id"))] = e.time_unix
            target = self.frames.get(e.frame_id or 0, session)
            attributes = {"stackroute.node_path": e.path}
            if e.error:
                attributes["stackroute.error"] = e.error
            target.add_event(e.kind.value, attributes=attributes, timestamp=_ns(e.time_unix))
        if e.kind in _ENDS:
            outcome = str(e.detail.get("status", e.kind.value))
            if e.kind is EventKind.CANCEL:
                session.set_status(trace.Status(trace.StatusCode.ERROR, "cancelled"))
            self.close(e.time_unix, outcome)

    def _start_session(self, e: TraceEvent) -> Any:
        self.session = self.tracer.start_span(
            "invoke_agent stackroute", context=self.parent, start_time=_ns(e.time_unix),
            attributes={"gen_ai.operation.name": "invoke_agent",
                        "gen_ai.agent.name": "stackroute",
                        "gen_ai.conversation.id": self.run_id,
                        "gen_ai.request.model": self.model,
                        "gen_ai.system": self.system, "gen_ai.provider.name": self.system,
                        "stackroute.resumed": e.kind is not EventKind.START})
        return self.session

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
    span). Returns its tokens, both calls together: {"input", "output", "cached"}.

    The event's usage covers both calls (one `Decision`); where the router records the
    argument generation's own usage (`TraceEvent.arguments_call`), that span carries those
    tokens and the routing span the rest, else the routing span carries them all."""
    usage: Mapping[str, Any] = e.usage or {}
    detail = e.detail
    end_s = e.time_unix
    total_s = float(usage.get("latency_ms") or 0.0) / 1e3
    call = e.arguments_call
    arguments_usage: Mapping[str, Any] = {} if call is None else call.usage.to_dict()
    arguments_s = 0.0 if call is None else call.usage.latency_ms / 1e3
    probabilities = e.probabilities or {}
    tokens = {"input": int(usage.get("prompt_tokens") or 0),
              "output": int(usage.get("generated_tokens") or 0),
              "cached": int(usage.get("cached_tokens") or 0)}
    model_attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                        "gen_ai.system": system, "gen_ai.provider.name": system}
    if "policy" in detail:
        model_attributes["stackroute.policy"] = str(detail["policy"])
    attributes = {**model_attributes, "stackroute.call": "routing",
                  "stackroute.node_path": e.path,
                  "stackroute.menu_size": len(e.menu or ()),
                  "stackroute.choice": e.decision or "",
                  **_usage_attributes(usage, minus=arguments_usage),
                  "stackroute.speculation.accepted_levels":
                      int(usage.get("accepted_levels") or 0)}
    if e.decision is not None and e.decision in probabilities:
        attributes["stackroute.choice_probability"] = float(probabilities[e.decision])
    span = tracer.start_span(f"chat {model}", context=parent,
                             start_time=_ns(end_s - total_s), attributes=attributes)
    span.end(end_time=_ns(end_s - arguments_s))
    if e.arguments is not None or call is not None:  # a leaf's arguments
        attributes = {**model_attributes, "stackroute.call": "arguments",
                      "stackroute.node_path": e.path, "gen_ai.tool.name": e.decision or ""}
        if call is not None:  # unknown (a scripted router) is not zero
            attributes |= {"gen_ai.response.finish_reasons": [call.finish_reason],
                           "stackroute.forward_passes": call.usage.forward_passes,
                           **_usage_attributes(arguments_usage)}
            if call.fallback is not None:
                attributes["stackroute.arguments_fallback"] = call.fallback
        attributes |= _value_choice_attributes(detail.get("value_choices") or ())
        arguments = tracer.start_span(f"chat {model}", context=parent,
                                      start_time=_ns(end_s - arguments_s),
                                      attributes=attributes)
        arguments.end(end_time=_ns(end_s))
    return tokens


def _value_choice_attributes(choices: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How the leaf's values were filled (`arguments/filling.py`): each property's source as
    `name=source` (single, model, fallback, omitted, unsupported), and how many took a model
    choice. The values themselves stay out of the span (they are the caller's data)."""
    if not choices:
        return {"stackroute.arguments.num_values": 0}
    return {"stackroute.arguments.num_values": len(choices),
            "stackroute.arguments.value_sources": [f"{c.get('name')}={c.get('source')}"
                                                   for c in choices],
            "stackroute.arguments.model_choices": sum(c.get("source") == "model"
                                                      for c in choices)}


def _usage_attributes(usage: Mapping[str, Any],
                      minus: Mapping[str, Any] | None = None) -> dict[str, int]:
    """A call's token counts as span attributes (`usage` less `minus`, a part of it)."""
    def count(key: str) -> int:
        return max(0, int(usage.get(key) or 0) - int((minus or {}).get(key) or 0))

    return {"gen_ai.usage.input_tokens": count("prompt_tokens"),
            "gen_ai.usage.output_tokens": count("generated_tokens"),
            "stackroute.cached_tokens": count("cached_tokens"),
            "stackroute.prefill_tokens": count("prefill_tokens"),
            "stackroute.model_calls": count("model_calls")}


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

    def traceparent(self, run_id: str, frame_id: int | None) -> str | None:
        """The `traceparent` naming the open span of the run's frame `frame_id` (else its
        session span), or None when this process has no open span of the run. A session
        step runs in a worker thread, outside any request, and its own spans are built from
        its events after it returns; so its engine calls forward the span of the frame it
        runs in, and a remote engine's server spans join the run's trace there."""
        with self._lock:
            spans = self._runs.get(run_id)
            if spans is None or spans.is_ended:
                return None
            span = spans.frames.get(frame_id or 0) if frame_id is not None else None
            span = span if span is not None else spans.session
            return None if span is None else traceparent_of(span)

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
