"""Every `stackroute bench` experiment: its name, its module (imported only when it runs) and
the question it answers. bench/cli.py mounts each as `stackroute bench NAME …`; the index of
bench/results/ and bench/README.md use the same questions; tests/bench/test_smoke_commands.py
runs each one's `--smoke`.

Every module exposes `main(argv: list[str] | None = None) -> int` and takes `--smoke`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Experiment:
    name: str  # `stackroute bench NAME`
    module: str  # `module:main`
    question: str


def _e(name: str, module: str, question: str) -> Experiment:
    return Experiment(name, f"stackroute.bench.{module}", question)


EXPERIMENTS: tuple[Experiment, ...] = (
    # routing quality
    _e("policy", "experiments.policy",
       "Flat vs plain vs guided routing vs the evidence alone, per suite (the README's "
       "accuracy table)."),
    _e("robust", "experiments.robust", "Flat vs hierarchical vs each recovery mechanism."),
    _e("out-of-scope", "experiments.out_of_scope",
       "Requests no tool serves: does the router abstain, and what does abstaining cost on "
       "in-scope requests (issue 25)."),
    _e("abstention-cost", "experiments.abstention_cost",
       "A check that asks the model nothing: the in-scope successes it stops and the "
       "out-of-scope requests it stops, on every suite."),
    _e("right-call", "experiments.right_call",
       "The right tool with the right arguments: argument accuracy per model tier (issue 25)."),
    _e("missing-values", "experiments.missing_values",
       "A request that lacks a required value: is it asked of the user, or made up?"),
    _e("build-tree", "experiments.build_tree",
       "A tree built from a flat catalog vs the dataset's own taxonomy."),
    _e("calibrate", "experiments.calibrate",
       "The guided policy's recovery settings for a model, tuned on dev splits."),
    # routing speed
    _e("speculation", "experiments.speculation",
       "Step-by-step (cache off/on) vs speculative routing, with the decision-identity check."),
    _e("guided-speculation", "experiments.guided_speculation",
       "Guided routing with and without speculation: the same decisions?"),
    _e("speculation-engine", "experiments.speculation_engine",
       "One verification pass vs step-by-step engine calls over the same route."),
    _e("unwind", "experiments.unwind", "Unwinding in one pass vs plain routing."),
    _e("shared-prompt", "experiments.shared_prompt",
       "What a request prefills when its prompt is shared: full menus vs shortlisted, and "
       "the root's menu before vs after the request (issue 29)."),
    _e("request-latency", "experiments.request_latency",
       "Whole-request latency of two checkouts of stackroute, side by side."),
    # the engine
    _e("engine", "experiments.engine",
       "The engine's prefix cache on vs off over gold-route prompts."),
    _e("jump-forward", "experiments.jump_forward",
       "Argument generation with drafts, with jump-forward only, and token by token."),
    _e("precision", "experiments.precision",
       "bfloat16 vs float32: routing decisions and latency of the embedded model on CPU."),
    _e("precision-args", "experiments.precision_args",
       "bfloat16 vs float32: are arguments written as well?"),
    _e("threads", "experiments.threads",
       "Torch threads and the OpenMP wait policy on a (shared) CPU."),
    _e("peers", "experiments.peers",
       "Our engine beside outlines, xgrammar + transformers and llama.cpp on the same calls."),
    # the service
    _e("streaming", "experiments.streaming",
       "Time to first chunk vs last chunk of a streamed answer through `stackroute serve`."),
    _e("mcp", "experiments.mcp",
       "Tokens a client's model sees per request: several MCP servers' full tools/list vs "
       "the stackroute gateway."),
    # reliability
    _e("crash", "reliability.crash_harness",
       "SIGKILL `stackroute serve` under live sessions: no leaf runs twice, none is lost."),
    _e("chaos", "reliability.chaos",
       "Several instances over one PostgreSQL under kills, restarts, slow and frozen "
       "takeovers and deleted catalogs: side effects counted in the handlers' own table."),
    _e("multi-instance", "reliability.multi_instance",
       "A session relayed across three instances over one PostgreSQL: event latency."),
    _e("store-throughput", "reliability.store_throughput",
       "Session throughput by store: SQLite vs PostgreSQL."),
    _e("load", "reliability.load_test",
       "Concurrent routing and session clients against one server: 429s, no lost session, "
       "the prefix cache under its cap."),
    _e("fuzz", "reliability.fuzz_report",
       "Hostile catalogs and requests against the runtime and a real server."),
    # the index of results
    _e("index", "index", "Every folder of bench/results/ in one table (bench/results/INDEX.md)."),
)

BY_NAME = {e.name: e for e in EXPERIMENTS}
