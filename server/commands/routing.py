"""Commands that route: `route` (one decision), `run` (a whole task) and `eval` (accuracy
over a query file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from stackroute.server.commands.common import (
    JsonOpt,
    RoutingFlags,
    console,
    fail,
    load_tree,
    print_json,
)
from stackroute.server.commands.option_groups import EngineChoice, with_option_groups


@with_option_groups
def route(
    catalog: Path, query: str,
    node: Annotated[str, typer.Option("--node", help="router path to decide at")] = "",
    *, engine: EngineChoice, routing: RoutingFlags,
    as_json: JsonOpt = False,
) -> None:
    """One routing decision at a node (the root by default), through the same route call as
    `/v1/route` (its router, its prompt limits: the settings' defaults). One decision is one
    call: the flags it shares with run and eval that speculate or unwind change nothing."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.service.route_call import RouteCall, RouteContext, route_once

    try:
        tree = load_tree(catalog)
        made = engine.make()
        context = RouteContext.for_engine(made, routing.options_for(made))
        result = route_once(tree, RouteCall(catalog=tree.name, node=node, task=query),
                            context)
    except StackrouteError as e:
        raise fail(e) from e
    event = result.event
    out: dict[str, Any] = {
        "decision": event.decision, "node": node, "arguments": event.arguments,
        "probabilities": dict(event.probabilities or {}), "usage": dict(event.usage or {}),
        "routing": result.routing}
    for key in ("written_values", "missing_values"):
        if getattr(result, key):
            out[key] = list(getattr(result, key))
    if as_json:
        print_json(out)
        return
    from stackroute.server.commands.render import route_report

    console.print(route_report(out, event.menu))


@with_option_groups
def run(
    catalog: Path, query: str,
    flat: Annotated[bool, typer.Option("--flat", help="the flat baseline: every leaf in one "
                                                      "menu")] = False,
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="approve every "
                                               "confirmation gate")] = False,
    trace_file: Annotated[Path | None, typer.Option("--trace", help="write the trace "
                                                    "(JSONL) here")] = None,
    values: Annotated[str | None, typer.Option(
        "--values", help="a JSON object of values for a call that waits for what the request "
        "did not hold (--missing-values ask), e.g. '{\"amount\": 500}'")] = None,
    *, engine: EngineChoice, routing: RoutingFlags,
    as_json: JsonOpt = False,
) -> None:
    """Run a whole task through the stack machine."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.runtime.governance import RunStatus
    from stackroute.runtime.trace import write_jsonl
    from stackroute.server.routing.router import build_machine

    try:
        given = parse_values(values)
        tree = load_tree(catalog)
        made = engine.make()
        options = routing.options_for(made)
        machine = build_machine(tree, made, is_flat=flat, options=options)
        state = machine.start(query, is_flat=flat)
        machine.run(state)
        while state.status is RunStatus.PAUSED and state.pending is not None:
            pending = state.pending
            if pending.is_waiting_for_values:
                if given is None or any(n not in given for n in pending.missing_values):
                    break
                machine.supply(state, pending.digest,
                               {n: given[n] for n in pending.missing_values})
            elif auto_approve:
                machine.approve(state, pending.digest)
            else:
                break
            machine.run(state)
    except StackrouteError as e:
        raise fail(e) from e
    if trace_file is not None:
        with open(trace_file, "w", encoding="utf-8") as f:
            write_jsonl(state.trace, f)
    from stackroute.server.telemetry_spans import export_from_environ

    try:  # spans over OTLP when an endpoint is set
        export_from_environ(state.trace, run_id=state.run_id, model=made.info.model,
                            system=made.info.engine)
    except StackrouteError as e:
        raise fail(e) from e
    outcome = {"done": "done", "paused": "paused", "limit": "limit"}.get(state.status.value,
                                                                         "error")
    out = {"outcome": outcome,
           "calls": [{k: c[k] for k in ("path", "arguments", "written_values",
                                        "supplied_values") if k in c}
                     for c in state.calls],
           "usage": state.usage.to_dict(), "format_failures": state.num_format_failures,
           "routing": options.describe(), "model": made.info.model}
    if state.status is RunStatus.PAUSED and state.pending is not None:
        out["pending"] = state.pending.to_dict()
        if state.pending.is_waiting_for_values:
            from stackroute.runtime.missing_values import values_schema

            out["pending"]["values_schema"] = values_schema(
                tree.node(state.pending.path).parameters, state.pending.missing_values)
    if as_json:
        print_json(out)
        return
    from stackroute.server.commands.render import run_report

    console.print(run_report(out, state.trace))


@with_option_groups
def eval_(
    catalog: Path, queries: Path,
    flat: Annotated[bool, typer.Option("--flat")] = False,
    limit: Annotated[int | None, typer.Option("--limit")] = None,
    *, engine: EngineChoice, routing: RoutingFlags,
    as_json: JsonOpt = False,
) -> None:
    """Accuracy over a query file: success = the calls' paths equal the gold list. The route
    cache is shared by the whole file, so repeated requests are verified in one pass."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.commands.progress import progress_bar
    from stackroute.server.routing.router import build_machine
    from stackroute.server.tools.evaluate import EvalSummary, evaluate, read_queries

    try:
        tree = load_tree(catalog)
        items = read_queries(queries, limit=limit)
        made = engine.make()
        options = routing.options_for(made)
        machine = build_machine(tree, made, is_flat=flat, options=options)
    except StackrouteError as e:
        raise fail(e) from e
    summary = EvalSummary()
    with progress_bar("eval", total=len(items)) as bar:
        for result in evaluate(machine, tree, items):
            summary.results.append(result)
            bar.advance()
    out = {**summary.to_dict(), "routing": options.describe()}
    if as_json:
        print_json(out)
        return
    table = Table("metric", "value")
    for k, v in out.items():
        if k == "results":  # one row per query: --json lists them
            continue
        table.add_row(k, json.dumps(v) if isinstance(v, dict) else f"{v:.4g}"
                      if isinstance(v, float) else str(v))
    console.print(table)


def parse_values(text: str | None) -> dict[str, Any] | None:
    """`run --values`: a JSON object, or None where the flag was not given."""
    from stackroute.runtime.errors import InputError

    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise InputError(f"--values must be a JSON object such as '{{\"amount\": 500}}'; got "
                         f"{text!r} ({e})") from None
    if not isinstance(value, dict):
        raise InputError(f"--values must be a JSON object such as '{{\"amount\": 500}}'; got "
                         f"a JSON {type(value).__name__}: {text!r}")
    return value
