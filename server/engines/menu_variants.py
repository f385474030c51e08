"""What `Engine.prepare` compiles before the first request: the menus (at each router, all of
its children followed by each completion-state variant the runtime can offer there) and each
leaf's arguments schema.

This mirrors `StackMachine.menu_for` (runtime/machine.py): the root offers DONE only (it has no
parent to go BACK to); any other router offers BACK until its frame has produced something,
DONE once it has. A menu with a tried child left out (`exclude_tried`) compiles on first use.

>>> from stackroute.runtime.catalog import build_tree
>>> tree = build_tree({"name": "root", "children": [
...     {"name": "mail", "description": "email", "children": [
...         {"name": "send", "description": "send mail"}]},
...     {"name": "clock", "description": "the time"}]})
>>> menu_variants(tree)
[('mail', 'clock', 'DONE'), ('send', 'BACK'), ('send', 'DONE')]
"""

from __future__ import annotations

from stackroute.runtime.menu import CompletionState
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import EMPTY_OBJECT_SCHEMA, Constraint

_ROOT_STATES = ((CompletionState.DONE,),)
_INNER_STATES = ((CompletionState.BACK,), (CompletionState.DONE,))


def menu_variants(tree: CapabilityTree) -> list[tuple[str, ...]]:
    """Every router's full menus (option names), router by router in `tree.routers()` order:
    the menus `prepare` compiles, and as many as `PrepareStats.num_menus` counts."""
    return [node.child_names + tuple(state.value for state in states)
            for node in tree.routers()
            for states in (_ROOT_STATES if node.depth == 0 else _INNER_STATES)]


def leaf_schemas(tree: CapabilityTree) -> list[Constraint]:
    """Every leaf's arguments constraint (the empty object where a leaf declares none), leaf
    by leaf in `tree.leaves()` order: as many as `PrepareStats.num_schemas` counts."""
    return [Constraint.json(leaf.parameters or EMPTY_OBJECT_SCHEMA) for leaf in tree.leaves()]
