"""How `run` and `route` print for people: the route as a tree (rich), then a usage table.
`--json` prints the contract's object instead and never comes here.

    <root>
    └── payments  p=0.91
        ├── send_money {"payee": "Asha", "amount": 500}  p=0.88
        │   └── = {"payee": "Asha", "amount": 500}
        └── DONE  p=0.97
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.server.routing.abstention import declined

MAX_VALUE_CHARS = 80  # arguments and results are cut here (the trace file has them whole)
MAX_OPTIONS_SHOWN = 12  # a wider menu shows its most probable options (--json has them all)
USAGE_COLUMNS = (("model_calls", "model calls"), ("prompt_tokens", "prompt"),
                 ("prefill_tokens", "prefilled"), ("cached_tokens", "cached"),
                 ("generated_tokens", "generated"), ("forward_passes", "passes"),
                 ("speculated_levels", "drafted levels"), ("accepted_levels", "accepted"),
                 ("latency_ms", "latency ms"))
ALWAYS_SHOWN = frozenset({"model_calls", "prompt_tokens", "prefill_tokens", "cached_tokens",
                          "generated_tokens", "latency_ms"})


def route_tree(trace: Iterable[TraceEvent]) -> Tree:
    """A run's trace as a tree: frames nest, each routing decision with its probability,
    leaf calls with their arguments and outcome, gates, missteps and limits where they
    happened."""
    root = Tree(Text("<root>", style="bold"), guide_style="dim")
    frames: dict[int | None, Tree] = {}
    calls: dict[str, Tree] = {}
    entered: Text | None = None  # what the decision that led here says (p, or no model call)
    for e in trace:
        here = frames.get(e.frame_id, root)
        if e.kind is EventKind.START:
            frames[e.frame_id] = root
        elif e.kind is EventKind.PUSH:
            label = Text(e.path.rsplit("/", 1)[-1], style="bold")
            frames[e.frame_id] = frames.get(e.parent_id, root).add(_with(label, entered))
        elif e.kind is EventKind.ROUTE:
            entered = _decision_note(e)
            stopped = _abstained(e)
            if stopped is not None:
                here.add(stopped)
            if e.decision in ("DONE", "BACK"):
                here.add(_with(Text(e.decision, style="dim"), entered))
        elif e.kind is EventKind.LEAF_PENDING:
            leaf = str(e.detail.get("leaf", e.path)).rsplit("/", 1)[-1]
            label = Text.assemble((leaf, "bold cyan"), " ", _short(e.arguments or {}))
            calls[str(e.detail.get("call_id"))] = call = here.add(_with(label, entered))
            written = e.detail.get("written_values")
            if written:
                call.add(Text("written by the model, not taken from the request: "
                              + ", ".join(map(str, written)), style="yellow"))
        elif e.kind is EventKind.LEAF_RESULT:
            call = calls.get(str(e.detail.get("call_id")), here)
            call.add(Text(f"error: {e.error}", style="red") if e.error
                     else Text.assemble("= ", _short(e.detail.get("result"))))
        elif e.kind is EventKind.VALUES_PAUSE:
            calls.get(str(e.detail.get("call_id")), here).add(Text(
                "paused: the request did not say " + ", ".join(
                    map(str, e.detail.get("missing_values", ()))), style="yellow"))
        elif e.kind is EventKind.VALUES_SUPPLY:
            calls.get(str(e.detail.get("call_id")), here).add(Text.assemble(
                ("given by the user: ", "yellow"), _short(
                    {k: (e.arguments or {}).get(k) for k in e.detail.get("supplied_values", ())})))
        elif e.kind is EventKind.GATE_PAUSE:
            calls.get(str(e.detail.get("call_id")), here).add(
                Text("paused: waits for approval", style="yellow"))
        elif e.kind in (EventKind.GATE_APPROVE, EventKind.GATE_REJECT):
            word = "approved" if e.kind is EventKind.GATE_APPROVE else "rejected"
            calls.get(str(e.detail.get("call_id")), here).add(Text(word, style="yellow"))
        elif e.kind in (EventKind.MISSTEP, EventKind.LIMIT, EventKind.ALERT,
                        EventKind.CANCEL):
            what = e.error or json.dumps(dict(e.detail), ensure_ascii=False)
            here.add(Text(f"{e.kind.value}: {what}", style="red"))
    return root


def usage_table(usage: Mapping[str, Any], *, title: str | None = None) -> Table:
    """One row: tokens prompted, prefilled and cached, calls, passes and latency."""
    shown = [(k, name) for k, name in USAGE_COLUMNS
             if k in ALWAYS_SHOWN or usage.get(k)]
    table = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD)
    for _, name in shown:
        table.add_column(name, justify="right")
    table.add_row(*(_number(usage.get(k, 0)) for k, _ in shown))
    return table


def run_report(out: Mapping[str, Any], trace: Sequence[TraceEvent]) -> RenderableType:
    """`run`'s human output: the route, the outcome, the usage table."""
    outcome = str(out["outcome"])
    style = {"done": "green", "paused": "yellow"}.get(outcome, "red")
    num_calls = len(out["calls"])
    summary = Text.assemble(("outcome ", "dim"), (outcome, f"bold {style}"),
                            (" · ", "dim"), f"{num_calls} call{'' if num_calls == 1 else 's'}",
                            (" · ", "dim"), f"{out['format_failures']} format failures")
    parts: list[RenderableType] = [route_tree(trace), summary,
                                   Text.assemble(("model ", "dim"), str(out.get("model", "?")),
                                                 (" · routing ", "dim"),
                                                 _routing(out["routing"]))]
    pending = out.get("pending")
    if pending is not None and pending.get("missing_values"):
        asked = pending["values_schema"]["properties"]
        example = "{" + ", ".join(f'"{name}": <{asked[name].get("type", "value")}>'
                                  for name in asked) + "}"
        parts.append(Text.assemble(
            ("waiting for values: ", "yellow"), (str(pending["path"]), "bold"), " ",
            _short(pending["arguments"]), " needs ", ", ".join(asked),
            ("  (run again with --values '", "dim"), example, ("')", "dim")))
    elif pending is not None:
        parts.append(Text.assemble(
            ("waiting at a gate: ", "yellow"), (str(pending["path"]), "bold"), " ",
            _short(pending["arguments"]), ("  (--auto-approve runs it)", "dim")))
    parts.append(usage_table(out["usage"]))
    return Group(*parts)


def route_report(out: Mapping[str, Any], menu: Sequence[str] | None) -> RenderableType:
    """`route`'s human output: the node, every option with its probability as a bar (the
    decision marked), the leaf's arguments, the usage table."""
    probabilities: Mapping[str, float] = out["probabilities"]
    node = Tree(Text(out["node"] or "<root>", style="bold"), guide_style="dim")
    every = list(menu) if menu else list(probabilities)
    options = _most_probable(every, probabilities, keep=str(out["decision"]))
    num_hidden = len(every) - len(options)
    width = max((len(o) for o in options), default=0)
    for option in options:
        p = probabilities.get(option)
        is_chosen = option == out["decision"]
        label = Text.assemble(("▶ " if is_chosen else "  "),
                              (option.ljust(width), "bold green" if is_chosen else ""),
                              "  ", _bar(p), f" {p:.3f}" if p is not None else " –")
        branch = node.add(label)
        if is_chosen and out.get("arguments") is not None:
            branch.add(_short(out["arguments"]))
            if out.get("missing_values"):
                branch.add(Text("the request did not say " + ", ".join(out["missing_values"])
                                + ": the call would ask for it", style="yellow"))
    if num_hidden:
        node.add(Text(f"… {num_hidden} less probable options (--json lists all)", style="dim"))
    return Group(node, Text.assemble(("routing ", "dim"), _routing(out["routing"])),
                 usage_table(out["usage"]))


def _most_probable(options: Sequence[str], probabilities: Mapping[str, float], *,
                   keep: str) -> list[str]:
    """At most `MAX_OPTIONS_SHOWN` options, in menu order: the most probable, and `keep`."""
    if len(options) <= MAX_OPTIONS_SHOWN:
        return list(options)
    ranked = sorted((o for o in options if o != keep), key=lambda o: -probabilities.get(o, 0.0))
    kept = {keep, *ranked[:MAX_OPTIONS_SHOWN - 1]}
    return [o for o in options if o in kept]


def _decision_note(e: TraceEvent) -> Text | None:
    """`p=0.91` for a decision the model made; "no model call" for one made without (the
    guided policy's finish rule, a decision verified earlier by speculation)."""
    p = (e.probabilities or {}).get(e.decision or "")
    if p is not None:
        return Text(f"p={float(p):.2f}", style="dim")
    if e.usage is not None and not e.usage.get("model_calls"):
        return Text("no model call", style="dim")
    return None


def _abstained(e: TraceEvent) -> Text | None:
    """Why a run made no call, where the abstention check stopped its first leaf."""
    stop = declined([e])
    if stop is None:
        return None
    bar = f" < {stop.threshold:.2f}" if stop.threshold is not None else ""
    return Text(f"no call: {stop.leaf.rsplit('/', 1)[-1]} does not fit the request "
                f"(abstention fit {stop.fit:.2f}{bar})", style="yellow")


def _with(label: Text, note: Text | None) -> Text:
    return label if note is None else Text.assemble(label, "  ", note)


def _short(value: Any) -> Text:
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS - 1] + "…"
    return Text(text)


def _bar(p: float | None, width: int = 20) -> Text:
    filled = 0 if p is None else round(max(0.0, min(1.0, p)) * width)
    return Text.assemble(("█" * filled, "cyan"), ("░" * (width - filled), "dim"))


def _number(value: Any) -> str:
    return f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"


def _routing(routing: Mapping[str, Any]) -> str:
    """How the run routed, one line; unwinding only when on (`--json` always has it)."""
    parts = [f"{k} {v}" for k, v in routing.items()
             if v is not None and (k, v) != ("unwinding", "off")]
    return " · ".join(parts)
