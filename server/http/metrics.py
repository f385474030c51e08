"""Prometheus metrics on a private registry (one per app: no global state), and `GET /metrics`.

Request and call counters are recorded as requests finish. The engine's own counters (tokens
prefilled vs served from the prefix cache, cache hit rate, constraint compile time), the queue
depth and the sessions by status are read when Prometheus scrapes, so they are never stale
and the hot path pays nothing for them. The sessions-by-status counts are a query on the store, so
they are reused for `session_gauge_ttl_s`; the model is named, never shown as a path.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Engine
from stackroute.server.http.app_state import get_state
from stackroute.server.service.engine_queue import EngineQueue

log = logging.getLogger(__name__)

NAMESPACE = "stackroute"
# Seconds. Routing calls on the CPU model take tens of ms to a few s; generations longer.
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# Engine counters with a meaning we know, as (metric name, help, labels). Other keys an engine
# reports are exported as `stackroute_engine_<key>` gauges.
_ENGINE_COUNTERS: dict[str, tuple[str, str, dict[str, str]]] = {
    "prefill_tokens": ("prompt_tokens", "Prompt tokens by where they came from", {
        "source": "prefilled"}),
    "cached_tokens": ("prompt_tokens", "Prompt tokens by where they came from", {
        "source": "cached"}),
    "forward_passes": ("engine_forward_passes", "Model forward passes", {}),
    "menu_calls": ("engine_calls", "Engine calls by kind", {"kind": "menu"}),
    "generate_calls": ("engine_calls", "Engine calls by kind", {"kind": "generate"}),
    "cache_evictions": ("prefix_cache_evictions", "Prefix cache entries evicted", {}),
}
_ENGINE_GAUGES: dict[str, tuple[str, str]] = {
    "cache_hit_rate": ("prefix_cache_hit_rate", "Share of prefix cache lookups that hit"),
    "cache_bytes": ("prefix_cache_bytes", "Bytes of KV held by the prefix cache"),
}
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_COMPILE_MS = {"menu_compile_ms": "menu", "grammar_compile_ms": "grammar"}


class Metrics:
    """Every metric of one app. `bind` tells it where the scrape-time figures come from."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.http_requests = Counter(
            "http_requests", "HTTP requests by route template and status",
            ["method", "route", "status"], namespace=NAMESPACE, registry=r)
        self.http_latency = Histogram(
            "http_request_duration_seconds", "HTTP request latency", ["method", "route"],
            namespace=NAMESPACE, buckets=LATENCY_BUCKETS_S, registry=r)
        self.routing_calls = Counter(
            "routing_calls", "Routing calls (one constrained menu decision each) by outcome",
            ["outcome"], namespace=NAMESPACE, registry=r)
        self.routing_latency = Histogram(
            "routing_call_duration_seconds", "Routing call latency", namespace=NAMESPACE,
            buckets=LATENCY_BUCKETS_S, registry=r)
        self.model_calls = Counter(
            "model_calls", "OpenAI-compatible completions by endpoint and constraint kind",
            ["endpoint", "constraint"], namespace=NAMESPACE, registry=r)
        self.model_latency = Histogram(
            "model_call_duration_seconds", "Engine time of one completion", ["endpoint"],
            namespace=NAMESPACE, buckets=LATENCY_BUCKETS_S, registry=r)
        self.completion_tokens = Counter(
            "completion_tokens", "Tokens generated (forced and sampled)", ["endpoint"],
            namespace=NAMESPACE, registry=r)
        self._scraped = _ScrapeTimeCollector()
        r.register(self._scraped)

    def bind(self, *, engine: Engine, queue: EngineQueue,
             sessions_by_status: Callable[[], Mapping[str, int]] | None = None) -> None:
        """Sources read at scrape time: the engine, the EngineQueue, session counts."""
        self._scraped.engine = engine
        self._scraped.queue = queue
        self._scraped.sessions_by_status = sessions_by_status

    def track_sessions(self, sessions_by_status: Callable[[], Mapping[str, int]], *,
                       max_age_s: float = 0.0) -> None:
        """Count sessions by status with `sessions_by_status` (a COUNT on the store), at most
        once per `max_age_s`: `/metrics` is open, and a scrape must not cost a query each."""
        self._scraped.sessions_by_status = _Cached(sessions_by_status, max_age_s=max_age_s)

    def observe_request(self, *, method: str, route: str, status: int, latency_s: float) -> None:
        """Count a finished request. `method` is the client's raw method: any but the
        standard ones is counted as "other", so a client cannot mint label values (a label
        value lives as long as the process). `route` is already a template."""
        method = method if method in KNOWN_METHODS else "other"
        self.http_requests.labels(method, route, str(status)).inc()
        self.http_latency.labels(method, route).observe(latency_s)

    def observe_routing_call(self, *, outcome: str, usage: Usage) -> None:
        """One routing decision; `outcome` is a small closed set (router, leaf, done, back)."""
        self.routing_calls.labels(outcome).inc()
        self.routing_latency.observe(usage.latency_ms / 1e3)

    def observe_model_call(self, *, endpoint: str, constraint: str, usage: Usage) -> None:
        self.model_calls.labels(endpoint, constraint).inc()
        self.model_latency.labels(endpoint).observe(usage.latency_ms / 1e3)
        self.completion_tokens.labels(endpoint).inc(usage.generated_tokens)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _ScrapeTimeCollector(Collector):
    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.queue: EngineQueue | None = None
        self.sessions_by_status: Callable[[], Mapping[str, int]] | None = None

    def describe(self) -> list[Metric]:
        return []  # families depend on the engine bound later; nothing to pre-declare

    def collect(self) -> Iterator[Metric]:
        yield from self._queue_metrics()
        if self.engine is not None:
            yield from _engine_metrics(self.engine)
        if self.sessions_by_status is not None:
            gauge = GaugeMetricFamily(f"{NAMESPACE}_sessions", "Sessions by status",
                                      labels=["status"])
            try:
                counts = dict(self.sessions_by_status())
            except Exception:  # a broken source must not break the whole scrape
                log.exception("reading session counts for /metrics failed")
                counts = {}
            for status, count in sorted(counts.items()):
                gauge.add_metric([str(status)], float(count))
            yield gauge

    def _queue_metrics(self) -> Iterator[Metric]:
        if self.queue is None:
            return
        waiting = GaugeMetricFamily(f"{NAMESPACE}_queue_depth",
                                    "Requests waiting for the engine")
        waiting.add_metric([], float(self.queue.num_waiting))
        running = GaugeMetricFamily(f"{NAMESPACE}_queue_running",
                                    "Requests the engine is serving now")
        running.add_metric([], float(self.queue.num_running))
        rejected = CounterMetricFamily(f"{NAMESPACE}_queue_rejected",
                                       "Requests refused with 429 because the queue was full")
        rejected.add_metric([], float(self.queue.num_rejected))
        yield from (waiting, running, rejected)


def _engine_metrics(engine: Engine) -> Iterator[Metric]:
    try:
        figures = engine.metrics()
    except Exception:  # a broken engine counter must not hide the other metrics
        log.exception("engine.metrics() failed during a /metrics scrape")
        return
    info = GaugeMetricFamily(f"{NAMESPACE}_engine_info", "The engine and model served",
                             labels=["engine", "model"])
    info.add_metric([engine.info.engine, model_label(engine.info.model)], 1.0)
    yield info
    counters: dict[str, CounterMetricFamily] = {}
    for key, (name, doc, labels) in _ENGINE_COUNTERS.items():
        if key in figures:
            family = counters.setdefault(name, CounterMetricFamily(
                f"{NAMESPACE}_{name}", doc, labels=list(labels)))
            family.add_metric(list(labels.values()), figures[key])
    yield from counters.values()
    compile_s = CounterMetricFamily(f"{NAMESPACE}_constraint_compile_seconds",
                                    "Time spent compiling constraints", labels=["kind"])
    for key, kind in _COMPILE_MS.items():
        if key in figures:
            compile_s.add_metric([kind], figures[key] / 1e3)
    yield compile_s
    for key, (name, doc) in _ENGINE_GAUGES.items():
        if key in figures:
            yield GaugeMetricFamily(f"{NAMESPACE}_{name}", doc, value=figures[key])
    prefill, cached = figures.get("prefill_tokens"), figures.get("cached_tokens")
    if prefill is not None and cached is not None:
        total = prefill + cached
        yield GaugeMetricFamily(f"{NAMESPACE}_prefix_cache_token_ratio",
                                "Share of prompt tokens served from the prefix cache",
                                value=cached / total if total else 0.0)
    known = {*_ENGINE_COUNTERS, *_ENGINE_GAUGES, *_COMPILE_MS}
    for key in sorted(set(figures) - known):
        name = re.sub(r"[^a-zA-Z0-9_]", "_", key)
        yield GaugeMetricFamily(f"{NAMESPACE}_engine_{name}", f"engine figure {key!r}",
                                value=figures[key])


def model_label(model: str) -> str:
    """The model's name for the open `/metrics`: a filesystem path (an engine built from a
    path may name its model so) loses its folders, which tell a scraper about the host; a
    served name such as `org/model` stays.

    >>> model_label("/srv/models/acme-7b"), model_label("Qwen/Qwen2.5-1.5B")
    ('acme-7b', 'Qwen/Qwen2.5-1.5B')
    """
    text = model.rstrip("/\\")
    if text.startswith(("/", "~", ".", "\\")) or re.match(r"^[A-Za-z]:[\\/]", text) \
            or "\\" in text or text.count("/") > 1:
        return re.split(r"[\\/]", text)[-1]
    return text


class _Cached:
    """A zero-argument source whose answer is reused for `max_age_s` seconds. Scrapes run on
    worker threads: one lock, so concurrent scrapes past the age count once."""

    def __init__(self, source: Callable[[], Mapping[str, int]], *, max_age_s: float) -> None:
        self.source = source
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._value: Mapping[str, int] | None = None
        self._at = 0.0

    def __call__(self) -> Mapping[str, int]:
        with self._lock:
            now = time.monotonic()
            if self._value is None or now - self._at >= self.max_age_s:
                self._value = dict(self.source())
                self._at = now
            return self._value


router = APIRouter(tags=["operations"])


@router.get("/metrics", response_class=Response, summary="Prometheus metrics",
            responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
                             "description": "Prometheus text exposition format"}})
def metrics(request: Request) -> Response:
    # A sync route: FastAPI runs it in a worker thread, so a slow engine.metrics() (it may take
    # a lock) never stalls the event loop.
    state = get_state(request)
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
