"""The flat baseline: every leaf in one menu, run by the same machine (tier a/b)."""

from __future__ import annotations

from machine_kit import bank_handlers, bank_tree, drive, make_machine
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.flat import flatten
from stackroute.runtime.handlers import LocalExecutor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import PromptLayout, PromptStyle
from stackroute.runtime.router import ScriptedRouter
from stackroute.runtime.tree import CapabilityTree


def test_flatten_bank() -> None:
    flat = flatten(bank_tree())
    assert flat.root.child_names == ("send_money", "balance", "open_account", "monthly",
                                     "weather")
    assert {n.name: n.metadata["tree_path"] for n in flat.leaves()} == {
        "send_money": "payments/send_money", "balance": "payments/balance",
        "open_account": "accounts/open_account", "monthly": "accounts/statements/monthly",
        "weather": "weather"}
    assert flat.node("send_money").sensitive
    assert flat.node("monthly").parameters == bank_tree().node(
        "accounts/statements/monthly").parameters
    stats = flat.stats()
    assert (stats.num_leaves, stats.num_routers, stats.depth, stats.max_menu) == (5, 1, 1, 5)


def test_colliding_leaf_names_get_their_path() -> None:
    tree = build_tree({"name": "r", "description": "", "children": [
        {"name": "a", "description": "", "children": [{"name": "list", "description": ""}]},
        {"name": "b", "description": "", "children": [{"name": "list", "description": ""},
                                                       {"name": "get", "description": ""}]}]})
    assert flatten(tree).root.child_names == ("a__list", "b__list", "get")


def test_flat_run_reports_tree_paths() -> None:
    flat = flatten(bank_tree())
    machine = StackMachine(flat, ScriptedRouter([("monthly", {"month": 2}),
                                                 ("open_account", {"kind": "savings"}), "DONE"]),
                           executor=LocalExecutor(_flat_handlers(flat)),
                           layout=PromptLayout(flat, PromptStyle(show_schemas=True)))
    state = machine.start("statement and account", run_id="r", is_flat=True)
    drive(machine, state)
    assert state.is_flat and state.status.value == "done"
    assert [c["path"] for c in state.calls] == ["accounts/statements/monthly",
                                                "accounts/open_account"]
    assert next(e.menu for e in state.trace if e.kind.value == "route") == (
        "send_money", "balance", "open_account", "monthly", "weather", "DONE")


def _flat_handlers(flat: CapabilityTree):  # type: ignore[no-untyped-def]
    """The bank handlers, rebound to the flat leaf names."""
    from stackroute.runtime.handlers import HandlerTable

    by_tree_path = bank_handlers()
    table = HandlerTable()
    for leaf in flat.leaves():
        original = bank_tree().node(leaf.metadata["tree_path"])
        handler = by_tree_path.resolve(original)
        if handler is not None:
            table.bind(leaf.path_str, handler)
    return table


def test_same_machine_same_answers_tree_vs_flat() -> None:
    tree_state = make_machine(["accounts", ("open_account", {"kind": "savings"}), "DONE",
                               "DONE"])
    state = tree_state.start("x", run_id="r")
    drive(tree_state, state)
    flat = flatten(bank_tree())
    flat_machine = make_machine([("open_account", {"kind": "savings"}), "DONE"], tree=flat,
                                handlers=_flat_handlers(flat))
    flat_state = flat_machine.start("x", run_id="r", is_flat=True)
    drive(flat_machine, flat_state)
    assert flat_state.calls == state.calls
    assert flat_state.num_steps == 2 and state.num_steps == 4


def test_handlers_bound_by_tree_path_run_in_the_flat_baseline() -> None:
    # The same HandlerTable serves the tree and its flat twin: a flat leaf is looked up by the
    # tree path it came from (a bug once made flat runs silently return their arguments).
    flat = flatten(bank_tree())
    machine = StackMachine(flat, ScriptedRouter([("open_account", {"kind": "savings"}), "DONE"]),
                           executor=LocalExecutor(bank_handlers()),
                           layout=PromptLayout(flat, PromptStyle(show_schemas=True)))
    state = machine.start("open an account", run_id="r", is_flat=True)
    drive(machine, state)
    assert state.calls[0]["result"] == {"account": "savings-1"}
