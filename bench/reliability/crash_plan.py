"""The crash harness's workload: a payments catalog whose leaves run recording handlers, and jobs
(sessions) that walk it along random plans with confirmation gates on the sensitive leaves.

A job's plan is written into its task for `scripted_engine` to follow; whether the operator
approves or rejects each gate is part of the job too, so an uninterrupted reference run can
make the same decisions (`reference_run`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stackroute.bench.fixtures.scripted_engine import ScriptedEngine
from stackroute.bench.reliability.crash_handlers import result_of
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.handlers import LeafOutcome
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.routing.router import build_machine

HANDLER_MODULE = "stackroute.bench.reliability.crash_handlers"
_ARGS = {"type": "object", "additionalProperties": False, "required": ["ref", "amount"],
         "properties": {"ref": {"type": "string"}, "amount": {"type": "integer"}}}


def _leaf(name: str, description: str, *, sensitive: bool = False) -> dict[str, Any]:
    node: dict[str, Any] = {"name": name, "description": description, "parameters": _ARGS,
                            "handler": f"{HANDLER_MODULE}:{name}"}
    if sensitive:
        node["sensitive"] = True
    return node


# Names are unique across the whole tree: a plan is a list of names.
CATALOG: dict[str, Any] = {
    "name": "crash-ops", "description": "Payment operations for the crash harness",
    "children": [
        {"name": "payments", "description": "Move money", "children": [
            {"name": "domestic", "description": "Domestic transfers", "children": [
                _leaf("check_limit", "Check the transfer limit"),
                _leaf("send_transfer", "Send a domestic transfer", sensitive=True)]},
            {"name": "international", "description": "Wires abroad", "children": [
                _leaf("fx_quote", "Quote an exchange rate"),
                _leaf("send_wire", "Send an international wire", sensitive=True)]}]},
        {"name": "cards", "description": "Card services", "children": [
            _leaf("card_status", "Show a card's status"),
            _leaf("freeze_card", "Freeze a card", sensitive=True)]},
        {"name": "accounts", "description": "Account services", "children": [
            {"name": "profile", "description": "Profile changes", "children": [
                _leaf("update_address", "Change the postal address")]},
            _leaf("statement", "Send a statement")]},
    ],
}


@dataclass(frozen=True)
class Job:
    """One session's script: where it goes and what the operator says at each gate."""

    tag: str  # unique in a harness run; the handlers' log lines carry it as `ref`
    amount: int
    plan: tuple[str, ...]
    rejects: frozenset[str]  # sensitive leaves whose gate the operator rejects
    is_auto_approve: bool

    @property
    def task(self) -> str:
        return f"job={self.tag} amount={self.amount} plan: {' '.join(self.plan)}"

    def gate_action(self, leaf_path: str) -> str:
        """"approve" or "reject" for the gate of this leaf."""
        return "reject" if leaf_path.rsplit("/", 1)[-1] in self.rejects else "approve"


def catalog_tree() -> CapabilityTree:
    return build_tree(CATALOG)


def make_job(rng: random.Random, index: int, tree: CapabilityTree) -> Job:
    """A random walk: each leaf is planned with probability 1/2, its routers with it; a router
    is sometimes planned alone (a dead end the session leaves with BACK)."""
    plan: list[str] = []

    def visit(node: Node) -> bool:
        chosen = False
        for child in node.children:
            if child.is_leaf:
                if rng.random() < 0.5:
                    plan.append(child.name)
                    chosen = True
                continue
            at = len(plan)
            plan.append(child.name)
            if visit(child) or rng.random() < 0.15:
                chosen = True
            else:
                del plan[at:]
        return chosen

    while not plan:
        visit(tree.root)
    gated = [n for n in plan if (leaf := _find(tree, n)) is not None and leaf.sensitive]
    rejects = frozenset(n for n in gated if rng.random() < 0.25)
    return Job(tag=f"J{index}", amount=rng.randint(1, 999), plan=tuple(plan),
               rejects=rejects, is_auto_approve=rng.random() < 0.25)


def tag_of(task: str) -> str | None:
    """The job tag a session's task carries."""
    for word in task.split():
        if word.startswith("job="):
            return word[4:]
    return None


class ReferenceExecutor:
    """The handlers' results without their side effect; the calls the crashed service reported
    as interrupted fail here with the same error, as an uninterrupted run told so would."""

    def __init__(self, interrupted: Mapping[str, str]) -> None:
        self.interrupted = interrupted

    def execute(self, leaf: Node, arguments: Mapping[str, Any], call_id: str) -> LeafOutcome:
        if call_id in self.interrupted:
            return LeafOutcome(error=self.interrupted[call_id])
        return LeafOutcome(result=result_of(leaf.name, dict(arguments)))


def reference_run(tree: CapabilityTree, job: Job, *, run_id: str, limits: Limits,
                  interrupted: Mapping[str, str], max_gates: int = 32) -> RunState:
    """The session run in-process without interruption, making the same decisions."""
    machine = build_machine(tree, ScriptedEngine(delay_s=0), limits=limits,
                            executor=ReferenceExecutor(interrupted))
    state = machine.start(job.task, run_id=run_id)
    for _ in range(max_gates):
        machine.run(state)
        if state.status is not RunStatus.PAUSED or state.pending is None:
            return state
        if job.is_auto_approve or job.gate_action(state.pending.path) == "approve":
            machine.approve(state, state.pending.digest)
        else:
            machine.reject(state, state.pending.digest)
    raise RuntimeError(f"reference run of {job.tag} passed more than {max_gates} gates")


def _find(tree: CapabilityTree, name: str) -> Node | None:
    return next((n for n in tree.nodes() if n.name == name), None)
