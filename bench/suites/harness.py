"""Run a benchmark suite: one JSONL record per item, a summary JSON, a markdown report, plots.

A run is resumable: items already in `items.jsonl` (other than failed ones) are skipped, so an
interrupted run continues where it stopped; the summary is always rebuilt from the whole file.
A failing item is recorded with status `error` and counted, never fatal. Timings exclude
model load, warm-up and constraint compilation (`engine.prepare`, reported separately).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from stackroute.bench.environment import environment
from stackroute.bench.suites.aggregate import item_metrics
from stackroute.bench.suites.gold import (
    GoldRouteError,
    GoldRouter,
    OverBudgetError,
    TokenCounter,
)
from stackroute.bench.suites.layouts import JsonProtocolLayout, VolatileFirstLayout
from stackroute.bench.suites.policies import ConstrainedPolicy, JsonProtocolPolicy, RoutingPolicy
from stackroute.bench.suites.records import (
    append_record,
    build_summary,
    latest_records,
    read_records,
    write_json,
)
from stackroute.bench.suites.scenarios import SCENARIOS, Group, ScenarioOptions
from stackroute.bench.workloads.generate import GENERATOR_VERSION
from stackroute.runtime.errors import InputError
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.handlers import LocalExecutor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt, PromptLayout, PromptStyle
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import ContextOverflowError, Engine, SamplingOptions
from stackroute.server.tools.evaluate import Query, run_query

log = logging.getLogger(__name__)

ITEMS_FILE = "items.jsonl"
SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.json"
REPORT_FILE = "report.md"
SMOKE_MAX_PROMPT_TOKENS = 2500  # a smoke run skips items whose prompt is longer (minutes here)
# A forced run follows the gold route, so governance limits only need to stay out of its way
# (Seal-Tools has queries of six calls across six fields: 31 routing calls, 7 at the root).
FORCED_LIMITS = Limits(max_steps=256, max_iterations=64, max_depth=16, max_branch_switches=64)
# What must match for a run to resume into an existing output folder.
CONFIG_KEYS = ("suite", "engine", "model", "seed", "is_smoke", "max_prompt_tokens",
               "generator_version")

EngineFactory = Callable[[bool], Engine]  # is_cache_enabled -> engine


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """What `stackroute bench` was asked to do."""

    engine: str = "transformers"
    model: str | None = None
    is_smoke: bool = False
    out_dir: Path | None = None
    seed: int = 0
    limit: int | None = None
    sizes: tuple[int, ...] | None = None
    max_prompt_tokens: int | None = None  # None: SMOKE_MAX_PROMPT_TOKENS in a smoke run
    data_dir: Path | None = None
    num_threads: int | None = None  # CPU threads of the transformers engine (None: its default)
    is_report_only: bool = False  # rebuild summary, report and plots from items.jsonl only
    command: str = ""

    @property
    def prompt_budget(self) -> int | None:
        if self.max_prompt_tokens is not None:
            return self.max_prompt_tokens
        return SMOKE_MAX_PROMPT_TOKENS if self.is_smoke else None


def default_out_dir(suite: str, options: BenchOptions) -> Path:
    """bench/results/<date>-<device>-<suite>[-smoke], e.g. `2026-12-02-cpu-scale-up`."""
    device = {"transformers": "cpu", "vllm": "gpu"}.get(options.engine, options.engine)
    smoke = "-smoke" if options.is_smoke else ""
    return Path("bench") / "results" / f"{dt.date.today().isoformat()}-{device}-{suite}{smoke}"


class EnginePool:
    """Engines by cache setting, created on first use and warmed up once (outside timing)."""

    def __init__(self, factory: EngineFactory) -> None:
        self.factory = factory
        self._engines: dict[bool, Engine] = {}
        self._prepared: set[tuple[int, int]] = set()

    def get(self, *, is_cache_enabled: bool) -> Engine:
        engine = self._engines.get(is_cache_enabled)
        if engine is None:
            engine = self.factory(is_cache_enabled)
            warm_up(engine)
            self._engines[is_cache_enabled] = engine
        return engine

    def prepare(self, engine: Engine, tree: CapabilityTree) -> float:
        """Compile `tree`'s menus and schemas once per engine; the compile time in ms."""
        key = (id(engine), id(tree))
        if key in self._prepared:
            return 0.0
        self._prepared.add(key)
        return engine.prepare(tree).compile_ms


def engine_factory(name: str, model: str | None, *,
                   num_threads: int | None = None) -> EngineFactory:
    """Engines from the registry; the transformers engines of one run share their weights.

    Every engine must accept `model` and `is_cache_enabled` (the cache suite turns the prefix
    cache off); `num_threads` is passed only when set."""
    from stackroute.server.engines.registry import create_engine

    made: list[Engine] = []

    def make(is_cache_enabled: bool) -> Engine:
        options: dict[str, Any] = {"is_cache_enabled": is_cache_enabled}
        if num_threads is not None:
            options["num_threads"] = num_threads
        loaded = getattr(made[0], "loaded", None) if made else None
        if loaded is not None:  # TransformersEngine: a second engine reuses the loaded model
            options["loaded"] = loaded
        engine = create_engine(name, model=model, **options)
        made.append(engine)
        return engine

    return make


def warm_up(engine: Engine) -> None:
    """One choice and one short generation, so first-call costs stay out of the timings."""
    prompt = Prompt((Message("user", "Warm-up: answer yes or no."),))
    engine.choose(prompt, ("yes", "no"))
    engine.generate(prompt, sampling=SamplingOptions(max_tokens=4))


@dataclass
class SuiteRun:
    """Where a suite's outputs went, and what this invocation did."""

    suite: str
    out_dir: Path
    summary: dict[str, Any]
    num_ran: int = 0  # items run by this invocation (the rest were resumed from the file)
    paths: dict[str, Path] = field(default_factory=dict)


def run_suite(suite: str, options: BenchOptions, *, pool: EnginePool | None = None,
              console: Console | None = None) -> SuiteRun:
    """Run (or resume) one suite and write items.jsonl, summary.json, report.md, plots/."""
    from stackroute.bench.suites.plots import write_plots
    from stackroute.bench.suites.report import write_report

    scenario = SCENARIOS.get(suite)
    if scenario is None:
        raise InputError(f"unknown suite {suite!r}; known suites: {', '.join(SCENARIOS)}, all")
    out_dir = options.out_dir or default_out_dir(suite, options)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = _check_config(out_dir, suite, options)
    groups = scenario.groups(ScenarioOptions(seed=options.seed, limit=options.limit,
                                             is_smoke=options.is_smoke, sizes=options.sizes,
                                             data_dir=options.data_dir))
    items_path = out_dir / ITEMS_FILE
    done = {r["key"] for r in read_records(items_path) if r["status"] != "error"}
    pending = [] if options.is_report_only else [
        (g, q) for g in groups for q in g.queries if item_key(g, q) not in done]
    pool = pool or EnginePool(engine_factory(options.engine, options.model,
                                             num_threads=options.num_threads))
    started = time.time()
    invocation: dict[str, Any] = {"command": options.command, "started_at": _iso(started),
                                  "num_ran": 0}
    num_ran = 0
    with _progress(console) as progress:
        task = progress.add_task(suite, total=len(pending))
        for group, queries in _by_group(pending):
            engine = pool.get(is_cache_enabled=group.variant.is_cache_enabled)
            if "environment" not in invocation:  # once the engine is up: its threads, GPUs
                invocation["environment"] = environment()
                config.setdefault("engine_info", dataclasses.asdict(engine.info))
                config.setdefault("invocations", []).append(invocation)
                write_json(out_dir / CONFIG_FILE, config)  # a killed run keeps its provenance
            runner = _GroupRunner(group, engine, pool, budget=options.prompt_budget)
            for query in queries:
                progress.update(task, description=f"{suite} {group.name}")
                record = runner.run(query)
                record["suite"] = suite
                append_record(items_path, record)
                num_ran += 1
                invocation["num_ran"] = num_ran
                progress.advance(task)
    invocation["duration_s"] = round(time.time() - started, 1)
    write_json(out_dir / CONFIG_FILE, config)
    selected = {item_key(g, q) for g in groups for q in g.queries}  # this command's items
    records = [r for r in latest_records(read_records(items_path)) if r["key"] in selected]
    summary = build_summary(suite, scenario.summary, records, groups, config, options)
    write_json(out_dir / SUMMARY_FILE, summary)
    paths = {"items": items_path, "summary": out_dir / SUMMARY_FILE,
             "report": write_report([summary], out_dir / REPORT_FILE)}
    paths.update(write_plots([summary], out_dir / "plots"))
    return SuiteRun(suite=suite, out_dir=out_dir, summary=summary, num_ran=num_ran,
                    paths=paths)


def run_all(options: BenchOptions, *, suites: Sequence[str] | None = None,
            pool: EnginePool | None = None, console: Console | None = None) -> list[SuiteRun]:
    """Several suites (all by default) on one engine, each in `<out>/<suite>/`, then one
    report and plots over all of them in `<out>`."""
    from stackroute.bench.suites.plots import write_plots
    from stackroute.bench.suites.report import write_report

    unknown = [s for s in suites or () if s not in SCENARIOS]
    if unknown:
        raise InputError(f"unknown suite(s) {unknown}; known suites: {', '.join(SCENARIOS)}")
    base = options.out_dir or default_out_dir("all", options)
    pool = pool or EnginePool(engine_factory(options.engine, options.model,
                                             num_threads=options.num_threads))
    runs = []
    for suite in suites or SCENARIOS:
        suite_options = dataclasses.replace(options, out_dir=base / suite)
        try:
            runs.append(run_suite(suite, suite_options, pool=pool, console=console))
        except InputError as e:  # e.g. seal-tools data absent: the other suites still run
            log.warning("suite %s not run: %s", suite, e)
    summaries = [r.summary for r in runs]
    write_report(summaries, base / REPORT_FILE)
    write_plots(summaries, base / "plots")
    return runs


def item_key(group: Group, query: Query) -> str:
    return f"{group.name}/{query.id}"


class _GroupRunner:
    """Runs the items of one group on one engine (layout, policy and executor shared)."""

    def __init__(self, group: Group, engine: Engine, pool: EnginePool, *,
                 budget: int | None) -> None:
        self.group = group
        self.engine = engine
        self.pool = pool
        self.budget = budget
        self.counter = TokenCounter(engine)
        self.policy = make_policy(group.variant.policy, engine)
        self.executor = LocalExecutor()
        self._layouts: dict[int, PromptLayout] = {}

    def layout(self, tree: CapabilityTree) -> PromptLayout:
        if id(tree) not in self._layouts:
            self._layouts[id(tree)] = make_layout(self.group.variant.layout, tree,
                                                  self.group.style)
        return self._layouts[id(tree)]

    def run(self, query: Query) -> dict[str, Any]:
        group = self.group
        record: dict[str, Any] = {"key": item_key(group, query), "num_leaves": group.num_leaves,
                                  **group.variant.to_dict(), "query_id": query.id,
                                  "tags": list(query.tags), "gold": list(query.gold)}
        router = GoldRouter(self.policy, self.counter, gold=query.gold, gold_args=query.args,
                            max_context_tokens=self.engine.info.max_context_tokens,
                            max_prompt_tokens=self.budget)
        status, error, wall_ms, compile_ms = "ok", None, 0.0, 0.0
        try:
            tree = group.catalog(query)
            record["catalog_leaves"] = sum(1 for _ in tree.leaves())
            if group.is_prepared:
                compile_ms = self.pool.prepare(self.engine, tree)
            compiled_before = _compile_ms(self.engine)
            machine = StackMachine(tree, router, executor=self.executor,
                                   layout=self.layout(tree), limits=FORCED_LIMITS)
            counted_before = self.counter.counting_ms
            started = time.perf_counter()
            try:
                state = run_query(machine, query)
            finally:
                wall_ms = ((time.perf_counter() - started) * 1e3
                           - (self.counter.counting_ms - counted_before))
                compile_ms += _compile_ms(self.engine) - compiled_before
            called = tuple(c["path"] for c in state.calls)
            if state.status is not RunStatus.DONE or called != query.gold:
                raise GoldRouteError(f"forced run ended {state.status.value} after calls "
                                     f"{list(called)}: {state.error or ''}")
        except ContextOverflowError as e:
            status, error = "context_exceeded", str(e)
        except OverBudgetError as e:
            status, error = "skipped", str(e)
        except Exception as e:  # counted, never fatal: the next item still runs
            log.exception("item %s failed", record["key"])
            status, error = "error", f"{type(e).__name__}: {e}"
        record.update(status=status, error=error, wall_ms=round(wall_ms, 3),
                      compile_ms=round(compile_ms, 3),
                      metrics=item_metrics(router.calls, num_gold=len(query.gold)),
                      calls=[c.to_dict() for c in router.calls])
        return record


def make_policy(name: str, engine: Engine) -> RoutingPolicy:
    if name == "constrained":
        return ConstrainedPolicy(engine)
    if name == "json-unconstrained":
        return JsonProtocolPolicy(engine)
    raise ValueError(f"unknown policy {name!r}; known: constrained, json-unconstrained")


def make_layout(name: str, tree: CapabilityTree, style: PromptStyle) -> PromptLayout:
    layouts: dict[str, type[PromptLayout]] = {"append-only": PromptLayout,
                                              "volatile-first": VolatileFirstLayout,
                                              "json-protocol": JsonProtocolLayout}
    if name not in layouts:
        raise ValueError(f"unknown layout {name!r}; known: {', '.join(layouts)}")
    return layouts[name](tree, style)


def _compile_ms(engine: Engine) -> float:
    m = engine.metrics()
    return float(m.get("menu_compile_ms", 0.0)) + float(m.get("grammar_compile_ms", 0.0))


def _iso(unix_s: float) -> str:
    return dt.datetime.fromtimestamp(unix_s, dt.UTC).isoformat(timespec="seconds")


def _check_config(out_dir: Path, suite: str, options: BenchOptions) -> dict[str, Any]:
    wanted = {"suite": suite, "engine": options.engine, "model": options.model,
              "seed": options.seed, "is_smoke": options.is_smoke,
              "max_prompt_tokens": options.prompt_budget,
              "generator_version": GENERATOR_VERSION}
    path = out_dir / CONFIG_FILE
    if not path.exists():
        write_json(path, wanted)
        return wanted
    existing: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    diff = {k: (existing.get(k), wanted[k]) for k in CONFIG_KEYS if existing.get(k) != wanted[k]}
    if diff:
        raise InputError(f"{out_dir} holds a run with other settings {diff} (was, now); "
                         "resume with the same settings or choose another --out")
    summary_path = out_dir / SUMMARY_FILE
    if "invocations" not in existing and summary_path.exists():
        # Written before invocations were kept in config.json: take its summary's provenance.
        old = json.loads(summary_path.read_text(encoding="utf-8"))
        if "hardware" in old:
            existing["invocations"] = [{
                "command": old.get("command", ""), "started_at": old.get("started_at"),
                "num_ran": old.get("num_items", 0), "duration_s": old.get("duration_s"),
                "environment": {k: old.get(k) for k in ("hardware", "versions", "git")}}]
    return existing


def _by_group(pending: Sequence[tuple[Group, Query]]) -> Iterator[tuple[Group, list[Query]]]:
    current: Group | None = None
    batch: list[Query] = []
    for group, query in pending:
        if group is not current and current is not None:
            yield current, batch
            batch = []
        current = group
        batch.append(query)
    if current is not None:
        yield current, batch


def _progress(console: Console | None) -> Progress:
    """The commands' bar (with ETA), drawn only while stdout is a terminal."""
    from stackroute.server.commands.progress import new_progress

    return new_progress(console)
