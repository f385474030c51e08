"""Routing with recovery on a small household catalog: the catalog, its evidence over the
bag-of-words embedder and one run with recovery options (the doubles live in doubles.py)."""

from __future__ import annotations

from typing import Any

from doubles import LogitEngine, WordEmbedder
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.embeddings.leaf_index import EvidenceSource, LeafIndex
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query

# root
# ├── billing      (router)  pay_water, pay_power
# ├── transfers    (router)  split_rent, send_gift, abroad (router: wire_abroad)
# └── weather      (leaf)
HOUSE_CATALOG: dict[str, Any] = {
    "name": "house",
    "description": "Household money.",
    "children": [
        {"name": "billing", "description": "Bills of the house.", "children": [
            {"name": "pay_water", "description": "Pay the water bill now."},
            {"name": "pay_power", "description": "Pay the electricity bill now."},
        ]},
        {"name": "transfers", "description": "Money between people.", "children": [
            {"name": "split_rent", "description": "Split the rent with a housemate."},
            {"name": "send_gift", "description": "Send a gift of money to a friend."},
            {"name": "abroad", "description": "Money sent to other countries.", "children": [
                {"name": "wire_abroad", "description": "Wire money to a bank abroad."},
            ]},
        ]},
        {"name": "weather", "description": "Weather forecast for a city."},
    ],
}


def house_tree() -> CapabilityTree:
    return build_tree(HOUSE_CATALOG)


def evidence_source(tree: CapabilityTree, embedder: WordEmbedder | None = None,
                    ) -> EvidenceSource:
    embedder = embedder or WordEmbedder()
    return EvidenceSource(LeafIndex.from_tree(tree, embedder, model_id="words"), embedder)


def run(tree: CapabilityTree, engine: LogitEngine, task: str, **recovery: Any) -> RunState:
    """One run of `task` with the recovery options given (keyword arguments)."""
    options = RouterOptions(recovery=RecoveryOptions(**recovery), speculation=DraftSource.OFF)
    machine = build_machine(tree, engine, options=options, evidence=evidence_source(tree))
    return run_query(machine, Query(id="t", query=task, gold=(), args=None, tags=()))
