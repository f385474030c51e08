"""The markdown report: our numbers beside the paper's, in the same tables, from summaries.

Cells read "ours (paper)" where the paper reports the figure. The paper's figures come from
the article summarising arXiv 2607.11138 (shared/seed/hierarchical-orchestration-article.txt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

Row = Mapping[str, Any]

# (suite, catalog size, router) -> metric -> the paper's value (a number, or text for an
# approximate figure or a range).
PAPER: dict[tuple[str, int, str], dict[str, Any]] = {
    ("scale-up", 128, "flat"): {"route_input_tokens_mean": 28178,
                                "schema_tokens_per_call_mean": 17791, "route_calls_mean": 1},
    ("scale-up", 128, "hierarchical"): {"route_input_tokens_mean": 1733, "route_calls_mean": 4,
                                        "schema_tokens_per_call_mean": 277},
    ("scale-up", 256, "flat"): {"success": 0.0, "num_context_exceeded": "all"},
    ("scale-up", 256, "hierarchical"): {"route_input_tokens_mean": 2147, "success": 1.0},
    ("scale-up", 512, "flat"): {"success": 0.0, "num_context_exceeded": "all"},
    ("scale-up", 512, "hierarchical"): {"route_input_tokens_mean": 2875, "success": 1.0},
    **{("noisy-two-step", n, r): {"success": "≈0.73"} for n in (32, 64)
       for r in ("flat", "hierarchical")},
    ("noisy-two-step", 128, "flat"): {"success": "≈0.73", "route_prompt_chars_mean": 140335},
    ("noisy-two-step", 128, "hierarchical"): {"success": "≈0.73", "route_prompt_chars_mean": 5302,
                                              "wrong_action": 0, "wrong_choice": 0},
    **{("semantic-overlap", n, "flat"): {"success": 1.0} for n in (16, 32, 64, 128)},
    **{("semantic-overlap", n, "hierarchical"): {"success": "0.67–0.83"}
       for n in (16, 32, 64, 128)},
    ("clean-semantic", 16, "hierarchical"): {"success": 1.0, "wrong_choice": 0},
    ("clean-semantic", 128, "hierarchical"): {"success": 0.77, "wrong_choice": 0},
    **{("clean-semantic", n, "hierarchical"): {"wrong_choice": 0} for n in (32, 64)},
}

METHOD = """\
How to read these tables. Every item is one request routed **teacher-forced along its gold
route**: at each routing call the model is asked for its answer, the answer is recorded, and
the run continues with the gold answer, so all variants of a suite see the identical route
and its cost. Decoding is greedy, so when every answer equals gold this *is* the run the model
makes on its own: **success = first-try success** (a free run that strays and recovers with
BACK counts as a failure here). Arguments are the model's own when valid. *Route* figures
(input tokens, calls, schema tokens per call, prompt characters) cover the routing calls up to
the last gold leaf, as the paper counts them; argument generation and the DONE calls that
unwind the stack are in *prefill/cached* and the latencies. Input tokens are counted with the
model's own tokenizer and chat format; *schema tokens* are the tokens of the option lines of
the menu shown (the full schemas in the flat menu). A prompt longer than the model's context
scores 0 (as in the paper); its tokens are still counted. Latencies exclude model load,
warm-up and constraint compilation. *Answers right* is the share of
all routing answers (every call, after a miss too) that equal gold. Error kinds (first failure
of an item): *wrong action* =
a completion state (DONE/BACK) where a child was due or the reverse; *wrong choice* = another
child; *argument error* = right route, valid arguments that differ from gold; *format
failure* = an answer that is not exactly one menu option in the protocol's format, or
arguments that are not one schema-valid JSON object.
"""


def write_report(summaries: Sequence[Mapping[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(summaries), encoding="utf-8")
    return path


def render_report(summaries: Sequence[Mapping[str, Any]]) -> str:
    if not summaries:
        return "# stackroute benchmarks\n\nNo suite ran.\n"
    first = summaries[0]
    hw = first.get("hardware", {})
    git = first.get("git", {})
    dirty = git.get("num_changed_paths")
    lines = [
        "# stackroute benchmarks" + (" (smoke)" if first.get("is_smoke") else ""),
        "",
        f"- model: {first.get('model')} ({first.get('engine')}, {first.get('dtype')}, context "
        f"{_num(first.get('max_context_tokens'))} tokens)",
        f"- machine: {hw.get('cpu_model')}, {hw.get('cpu_cores')} cores, {hw.get('ram_gib')} "
        f"GiB RAM" + (f", GPUs {hw['gpus']}" if hw.get("gpus") else "")
        + (f", torch on {hw['torch_threads']} thread(s)" if hw.get("torch_threads") else "")
        + f"; 1-min load average when each run started: {_loads(summaries)} (a shared "
        "machine: read latencies with it)",
        f"- commit: {git.get('commit')}" + (f" plus {dirty} changed paths" if dirty else ""),
        f"- versions: {', '.join(f'{k} {v}' for k, v in first.get('versions', {}).items())}",
        f"- seed {first.get('seed')}, workload generator v{first.get('generator_version')}"
        + (f", at most {first['limit']} queries per row" if first.get("limit") else "")
        + (f", prompts over {_num(first['max_prompt_tokens'])} tokens skipped"
           if first.get("max_prompt_tokens") else ""),
        f"- command: `{first.get('command')}`",
        "",
        METHOD,
    ]
    for s in summaries:
        lines += _suite_section(s)
    return "\n".join(lines).rstrip() + "\n"


Column = tuple[str, Callable[[str, Row], str]]


def _loads(summaries: Sequence[Mapping[str, Any]]) -> str:
    loads = [i.get("load_average_1m") for s in summaries for i in s.get("invocations", [])]
    if not loads:
        loads = [s.get("hardware", {}).get("load_average_1m") for s in summaries]
    return ", ".join(_num(v, 1) for v in loads if v is not None) or "–"


def _suite_section(s: Mapping[str, Any]) -> list[str]:
    suite = s["suite"]
    rows: list[Row] = s["groups"]
    columns = SUITE_COLUMNS.get(suite, _DEFAULT_COLUMNS)
    out = [f"## {suite}", "", f"{s['description'][:1].upper()}{s['description'][1:]}. "
           f"{s['num_items']} items, {s['num_errors']} failed; the items' wall time adds up "
           f"to {_num(s.get('items_wall_s'))} s.", ""]
    out.append("| " + " | ".join(name for name, _ in columns) + " |")
    out.append("|" + "---|" * len(columns))
    for r in rows:
        out.append("| " + " | ".join(cell(suite, r) for _, cell in columns) + " |")
    out.append("")
    out += _ratios(suite, rows)
    out += _notes(suite, rows)
    return out


def _ratios(suite: str, rows: Sequence[Row]) -> list[str]:
    """Side-by-side ratios within one run: tree vs flat tokens; cache variants' wall time."""
    out: list[str] = []
    by = {(r["num_leaves"], r["variant"]): r for r in rows}
    sizes = sorted({r["num_leaves"] for r in rows})
    if suite in ("scale-up", "noisy-two-step", "semantic-overlap", "clean-semantic"):
        for n in sizes:
            flat, tree = by.get((n, "flat")), by.get((n, "hierarchical"))
            if flat and tree and flat.get("route_input_tokens_mean") and tree.get(
                    "route_input_tokens_mean"):
                ratio = flat["route_input_tokens_mean"] / tree["route_input_tokens_mean"]
                out.append(f"- {n} tools: the flat route needs {ratio:.1f}× the hierarchical "
                           "route's input tokens.")
    if suite == "cache":
        for n in sizes:
            for key, what in (("request_latency_ms_mean", "wall time per request"),
                              ("routing_latency_ms_mean", "routing-call time per request"),
                              ("prefill_tokens_mean", "prefilled tokens")):
                parts = _relative(by, n, key)
                if parts:
                    out.append(f"- {n} tools, mean {what} relative to append-only+cache: "
                               f"{parts}.")
    if suite == "constraint":
        for n in sizes:
            a, b = by.get((n, "menu-constrained")), by.get((n, "json-unconstrained"))
            if a and b and a.get("request_latency_ms_mean") and b.get("request_latency_ms_mean"):
                out.append(f"- {n} tools: unconstrained JSON takes "
                           f"{b['request_latency_ms_mean'] / a['request_latency_ms_mean']:.2f}× "
                           "the wall time per request of menu-constrained routing.")
    return [*out, ""] if out else []


def _relative(by: Mapping[tuple[int, str], Row], n: int, key: str) -> str:
    base = by.get((n, "append-only+cache"), {}).get(key)
    if not base:
        return ""
    parts = []
    for label in ("append-only+no-cache", "volatile-first+cache", "volatile-first+no-cache"):
        value = by.get((n, label), {}).get(key)
        if value:
            parts.append(f"{label} {value / base:.2f}×")
    return ", ".join(parts)


def _notes(suite: str, rows: Sequence[Row]) -> list[str]:
    notes = {
        "seal-tools": "The flat router cannot show 4,076 tools (about 1.3M characters of "
                      "menu); *flat-gold-fields* is the flat router restricted to the leaves "
                      "of the fields the gold tools belong to, an oracle head start the tree "
                      "does not get, and it still overflows the context on the larger fields. "
                      "The tree's descriptions are clipped (see the description column) so "
                      "the 146-field root menu fits the context.",
        "cache": "*volatile-first* is a naive layout that rebuilds each prompt with a per-call "
                 "line (call number, current path) before the stable text, so calls share no "
                 "prefix; the prefix cache still serves the arguments prompt of the same call.",
        "constraint": "*json-unconstrained* is the paper's protocol: the prompt asks for "
                      "`{\"choice\": \"<option>\"}`, generation runs without a constraint and "
                      "is parsed strictly afterwards (arguments likewise, against the schema); "
                      "*lenient* counts the failures a reader taking the first JSON object "
                      "anywhere in the text would still reject.",
    }
    skipped = sum(r.get("num_skipped", 0) for r in rows)
    out = [notes[suite], ""] if suite in notes else []
    if skipped:
        out += [f"{skipped} items were skipped: their prompt was over this run's token budget "
                "(a smoke run's limit, not the model's context); their tokens are counted in "
                "the route columns.", ""]
    return out


# -- cells -----------------------------------------------------------------------------------

def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    return f"{value:,.{digits}f}"


def _paper(suite: str, r: Row, key: str) -> Any:
    return PAPER.get((suite, r["num_leaves"], r["router"]), {}).get(key)


def _with_paper(key: str, digits: int = 0) -> Callable[[str, Row], str]:
    def cell(suite: str, r: Row) -> str:
        ours = _num(r.get(key), digits)
        theirs = _paper(suite, r, key)
        return ours if theirs is None else f"{ours} ({_num(theirs, digits)})"
    return cell


def _plain(key: str, digits: int = 0) -> Callable[[str, Row], str]:
    return lambda suite, r: _num(r.get(key), digits)


def _pair(a: str, b: str, digits: int = 0) -> Callable[[str, Row], str]:
    return lambda suite, r: f"{_num(r.get(a), digits)} / {_num(r.get(b), digits)}"


def _error(kind: str) -> Callable[[str, Row], str]:
    def cell(suite: str, r: Row) -> str:
        ours = _num(r.get("error_breakdown", {}).get(kind))
        theirs = _paper(suite, r, kind)
        return ours if theirs is None else f"{ours} ({_num(theirs)})"
    return cell


def _count(suite: str, r: Row) -> str:
    extra = [f"{r[k]} {label}" for k, label in (("num_skipped", "skipped"),
                                                ("num_errors", "failed")) if r.get(k)]
    return f"{r['num_items']}" + (f" ({', '.join(extra)})" if extra else "")


def _exceeded(suite: str, r: Row) -> str:
    ours = f"{r.get('num_context_exceeded', 0)}/{r['num_items']}"
    theirs = _paper(suite, r, "num_context_exceeded")
    return ours if theirs is None else f"{ours} ({theirs})"


def _errors(suite: str, r: Row) -> str:
    b = r.get("error_breakdown", {})
    return " / ".join(_num(b.get(k)) for k in ("wrong_action", "wrong_choice", "argument_error",
                                               "format_failure"))


def _hit_rate(suite: str, r: Row) -> str:
    rate = r.get("cache_hit_rate")
    return "–" if rate is None else f"{rate:.0%}"


_TOOLS: Column = ("tools", lambda s, r: f"{r['num_leaves']:,}")
_ROUTER: Column = ("router", lambda s, r: r["variant"])
_ITEMS: Column = ("items", _count)
_SUCCESS: Column = ("success (paper)", _with_paper("success", 2))
_LATENCY: Column = ("request ms p50 / p95", _pair("request_latency_ms_p50",
                                                 "request_latency_ms_p95"))
_CALL_LATENCY: Column = ("routing call ms p50 / p95", _pair("routing_call_latency_ms_p50",
                                                           "routing_call_latency_ms_p95"))
_DECISIONS: Column = ("answers right", _plain("decision_accuracy", 2))
_ERRORS: Column = ("first errors: action / choice / args / format", _errors)
_DEFAULT_COLUMNS: list[Column] = [_TOOLS, _ROUTER, _ITEMS, _SUCCESS, _LATENCY]

SUITE_COLUMNS: dict[str, list[Column]] = {
    "scale-up": [
        _TOOLS, _ROUTER, _ITEMS, _SUCCESS, _DECISIONS, _ERRORS,
        ("route input tokens (paper)", _with_paper("route_input_tokens_mean")),
        ("route calls (paper)", _with_paper("route_calls_mean", 1)),
        ("schema tokens per call (paper)", _with_paper("schema_tokens_per_call_mean")),
        ("context exceeded (paper)", _exceeded),
        ("prefilled / cached tokens", _pair("prefill_tokens_mean", "cached_tokens_mean")),
        ("model calls", _plain("model_calls_mean", 1)),
        _LATENCY, _CALL_LATENCY,
    ],
    "noisy-two-step": [
        _TOOLS, _ROUTER, _ITEMS, _SUCCESS, ("args success", _plain("args_success", 2)),
        _DECISIONS, ("route prompt chars (paper)", _with_paper("route_prompt_chars_mean")),
        ("wrong action (paper)", _error("wrong_action")),
        ("wrong choice (paper)", _error("wrong_choice")),
        ("argument errors", _error("argument_error")),
        ("format failures", _error("format_failure")),
        ("context exceeded", _exceeded), _LATENCY,
    ],
    "semantic-overlap": [
        _TOOLS, _ROUTER, _ITEMS, _SUCCESS, ("leaf recall", _plain("leaf_recall", 2)),
        _DECISIONS,
        ("wrong action", _error("wrong_action")), ("wrong choice", _error("wrong_choice")),
        ("format failures", _error("format_failure")), ("context exceeded", _exceeded),
        ("route input tokens", _plain("route_input_tokens_mean")), _LATENCY,
    ],
    "seal-tools": [
        _ROUTER, ("tools", lambda s, r: f"{r['num_leaves']:,}"), _ITEMS,
        ("description chars", _plain("description_chars_max")),
        ("exact (success)", _plain("success", 2)), ("leaf recall", _plain("leaf_recall", 2)),
        ("args success", _plain("args_success", 2)), _DECISIONS, _ERRORS,
        ("route input tokens", _plain("route_input_tokens_mean")),
        ("route calls", _plain("route_calls_mean", 1)), ("context exceeded", _exceeded),
        ("compile ms", _plain("compile_ms_total")), _LATENCY,
    ],
    "cache": [
        _TOOLS, ("variant", lambda s, r: r["variant"]), _ITEMS,
        ("prefilled / cached tokens", _pair("prefill_tokens_mean", "cached_tokens_mean")),
        ("hit rate", _hit_rate), ("model calls", _plain("model_calls_mean", 1)),
        ("routing ms per request (mean)", _plain("routing_latency_ms_mean")),
        ("request ms mean", _plain("request_latency_ms_mean")), _LATENCY, _CALL_LATENCY,
    ],
    "constraint": [
        _TOOLS, ("protocol", lambda s, r: r["variant"]), _ITEMS, _SUCCESS, _DECISIONS,
        ("format failures (lenient)", lambda s, r: f"{_num(r.get('format_failures'))} "
                                                   f"({_num(r.get('lenient_format_failures'))})"),
        ("failures per call", _plain("format_failures_per_call", 3)),
        ("wrong action", _error("wrong_action")), ("wrong choice", _error("wrong_choice")),
        _CALL_LATENCY,
        ("arguments call ms p50 / p95", _pair("arguments_call_latency_ms_p50",
                                              "arguments_call_latency_ms_p95")),
        _LATENCY,
    ],
}
SUITE_COLUMNS["clean-semantic"] = SUITE_COLUMNS["semantic-overlap"]
