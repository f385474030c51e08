"""Shortlisted menus (server/routing/shortlist.py): the decision from evidence scores, its
options from settings and flags, and guided routing through a shortlisted frame with a
scripted engine and a bag-of-words embedder (tier a)."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import pytest
from doubles import LogitEngine
from recovery_kit import evidence_source, house_tree
from stackroute.runtime.errors import InputError
from stackroute.runtime.menu import Menu, Shortlist
from stackroute.runtime.prompt import Prompt
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.prior import PriorOptions, menu_prior
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.routing.shortlist import EvidenceShortlister, ShortlistOptions, decide
from stackroute.server.tools.evaluate import Query, run_query

OPTIONS = ShortlistOptions(margin=0.05, max_options=3, min_hidden=2)


@pytest.mark.parametrize(("scores", "shown"), [
    ({"a": 0.9, "b": 0.5, "c": 0.4, "d": 0.3}, ("a",)),  # top-1 clear
    ({"a": 0.9, "b": 0.88, "c": 0.5, "d": 0.4}, ("a", "b")),  # top-2 clear, top-1 not
    ({"a": 0.9, "b": 0.89, "c": 0.88, "d": 0.87, "e": 0.86}, None),  # nothing stands out
    ({"a": 0.9, "b": 0.5, "c": 0.4}, ("a",)),  # hides exactly min_hidden
    ({"a": 0.9, "b": 0.5}, None),  # would hide one option only
    ({"a": 0.9, "b": 0.86, "c": 0.82, "d": 0.78, "e": 0.1}, None),  # gap after max_options
    ({"a": 0.9, "b": -math.inf, "c": -math.inf}, ("a",)),  # nothing else has evidence
    ({"a": -math.inf, "b": -math.inf, "c": -math.inf}, None),  # no evidence at all
])
def test_decide_shows_the_smallest_top_that_clears_the_margin(
        scores: dict[str, float], shown: tuple[str, ...] | None) -> None:
    shortlist = decide(scores, OPTIONS)
    assert (None if shortlist is None else shortlist.children) == shown


def test_the_margin_is_inclusive_and_recorded() -> None:
    shortlist = decide({"a": 0.6, "b": 0.55, "c": 0.1, "d": 0.0}, OPTIONS)
    assert shortlist is not None and shortlist.children == ("a",)
    assert shortlist.margin == pytest.approx(0.05)
    assert decide({"a": 0.6, "b": 0.56, "c": 0.1, "d": 0.0},
                  replace(OPTIONS, max_options=1)) is None


@pytest.mark.parametrize("bad", [{"margin": -0.1}, {"margin": math.nan}, {"max_options": 0},
                                 {"min_hidden": 0}, {"min_depth": -1}])
def test_bad_options_say_what_was_expected(bad: dict[str, float]) -> None:
    with pytest.raises(InputError, match="shortlist"):
        ShortlistOptions(**bad)  # type: ignore[arg-type]


def test_settings_and_flags_reach_the_router_options() -> None:
    from stackroute.server.commands.common import RoutingFlags
    from stackroute.server.settings import ServerSettings

    settings = ServerSettings(shortlist=True, shortlist_margin=0.12)
    options = settings.router_options("no-such-model")
    assert options.shortlist == ShortlistOptions(margin=0.12,
                                                 max_options=settings.shortlist_max_options)
    assert ServerSettings(shortlist=False).router_options("no-such-model").shortlist is None
    flags = RoutingFlags.parse(policy="guided", calibration=None, shortlist=True,
                               shortlist_margin=0.2)

    class Info:
        model = "no-such-model"

    class Engine:
        info = Info()

    assert flags.options_for(Engine()).shortlist == ShortlistOptions(
        margin=0.2, max_options=settings.shortlist_max_options)
    off = RoutingFlags.parse(policy="guided", calibration=None, shortlist=False)
    assert off.options_for(Engine()).shortlist is None


def test_other_scores_the_best_hidden_option_in_the_prior() -> None:
    tree = house_tree()
    evidence = evidence_source(tree).for_request("split the rent with my housemate")
    transfers = tree.node(("transfers",))
    menu = Menu(node_path="transfers", children=("send_gift",), states=())
    from stackroute.runtime.menu import CompletionState

    menu = replace(menu, states=(CompletionState.OTHER, CompletionState.BACK))
    prior = menu_prior(evidence, transfers, menu, calls=(), options=PriorOptions())
    assert prior.scores["OTHER"] == pytest.approx(
        evidence.node_score("transfers/split_rent"))
    assert prior.bias["OTHER"] == 0.0 and prior.bias["send_gift"] < 0


def shortlisting_options() -> RouterOptions:
    recovery = RecoveryOptions(is_contrast_enabled=True, is_fallback_enabled=False,
                               is_finish_enabled=False)
    return RouterOptions(recovery=recovery, speculation=DraftSource.OFF,
                         shortlist=ShortlistOptions(margin=0.05, max_options=2))


def routing_prompts(engine: LogitEngine) -> list[Prompt]:
    return [c.prompt for c in engine.routing_calls()]


def test_a_sure_frame_is_shortlisted_and_routes_without_its_neutral_contrast() -> None:
    tree = house_tree()
    engine = LogitEngine({})  # no preference of its own: the evidence decides
    machine = build_machine(tree, engine, options=shortlisting_options(),
                            evidence=evidence_source(tree))
    state = run_query(machine, Query(id="t", query="split the rent with my housemate",
                                     gold=(), args=None, tags=()))
    assert [c["path"] for c in state.calls] == ["transfers/split_rent"]
    menus = [c.options for c in engine.routing_calls()]
    assert ("split_rent", "OTHER", "BACK") in menus
    assert not any("OTHER" in c.options for c in engine.calls if c.is_neutral)
    push = next(e for e in state.trace if e.kind.value == "push")
    assert push.detail["shortlist"]["options"] == ["split_rent"]


class FixedShortlister:
    """Shows `children` at `path`'s frame, the full menu elsewhere."""

    def __init__(self, path: str, children: tuple[str, ...]) -> None:
        self.path, self.children = path, children

    def shortlist(self, task: str, calls: tuple[str, ...], node: Any, menu: Menu,
                  ) -> Shortlist | None:
        return Shortlist(children=self.children, margin=0.1) if node.path_str == self.path \
            else None


def test_a_shortlist_of_several_options_keeps_the_neutral_contrast() -> None:
    # The evidence put both shown options above the rest, not one above the other: the
    # model's request-independent taste (send_gift) must not decide between them.
    def logits(prompt: Prompt, options: tuple[str, ...]) -> dict[str, float]:
        if prompt.messages[-1].content.startswith(("split_rent ", "transfers finished")):
            return {"DONE": 60.0}  # a result: the task is done
        if "split_rent" in options:
            return {"send_gift": 3.0, "split_rent": 1.0}
        return {"transfers": 60.0} if "transfers" in options else {"DONE": 60.0}

    tree = house_tree()
    engine = LogitEngine(logits, neutral={"send_gift": 5.0, "transfers": 1.0})
    options = replace(shortlisting_options(),
                      recovery=replace(RecoveryOptions.off(), is_contrast_enabled=True))
    machine = build_machine(tree, engine, options=options)
    machine.shortlister = FixedShortlister("transfers", ("split_rent", "send_gift"))
    state = run_query(machine, Query(id="t", query="split the rent with my housemate",
                                     gold=(), args=None, tags=()))
    assert [c["path"] for c in state.calls] == ["transfers/split_rent"]
    neutral = [c for c in engine.calls if c.is_neutral and "OTHER" in c.options]
    assert len(neutral) == 1
    # the content-free counterpart of the shortlisted turn: the same options, no request
    shown = neutral[0].prompt.messages[-1].content
    assert "Likely options:" in shown and "split_rent" in shown and "abroad" not in shown
    # shown alone, an option is what the evidence is sure of: no contrast call for it
    engine.calls.clear()
    machine.shortlister = FixedShortlister("transfers", ("split_rent",))
    run_query(machine, Query(id="u", query="split the rent with my housemate", gold=(),
                             args=None, tags=()))
    assert not any("OTHER" in c.options for c in engine.calls if c.is_neutral)


def test_other_opens_the_full_menu_and_every_call_extends_the_previous_one() -> None:
    tree = house_tree()

    def logits(prompt: Prompt, options: tuple[str, ...]) -> dict[str, float]:
        if "OTHER" in options:
            return {"OTHER": 60.0}  # the model does not take the shortlist
        if "send_gift" in options:
            return {"send_gift": 60.0}
        if "DONE" in options and len(options) <= 2:
            return {"DONE": 60.0}
        return {"transfers": 60.0}

    engine = LogitEngine(logits)
    options = replace(shortlisting_options(),
                      recovery=replace(RecoveryOptions.off(), evidence_weight=1.0))
    machine = build_machine(tree, engine, options=options, evidence=evidence_source(tree))
    state = run_query(machine, Query(id="t", query="split the rent with my housemate",
                                     gold=(), args=None, tags=()))
    decisions = [e.decision for e in state.trace if e.kind.value == "route"]
    assert decisions[:3] == ["transfers", "OTHER", "send_gift"]
    prompts = routing_prompts(engine)
    for before, after in itertools.pairwise(prompts[:3]):
        assert after.messages[:len(before.messages)] == before.messages
    assert "Likely options:" in prompts[1].messages[-1].content
    assert prompts[2].messages[-1] == machine.layout.menu_turn(tree.node(("transfers",)))


def test_the_shortlister_leaves_the_root_and_small_menus_alone() -> None:
    tree = house_tree()
    source = evidence_source(tree)
    shortlister = EvidenceShortlister(lambda task, calls: source.for_request(task),
                                      ShortlistOptions(margin=0.0), PriorOptions())
    root_menu = Menu(node_path="", children=tuple(tree.root.child_names), states=())
    assert shortlister.shortlist("pay the water bill", (), tree.root, root_menu) is None
    billing = tree.node(("billing",))
    small = Menu(node_path="billing", children=billing.child_names, states=())
    assert shortlister.shortlist("pay the water bill", (), billing, small) is None
    transfers = tree.node(("transfers",))
    menu = Menu(node_path="transfers", children=transfers.child_names, states=())
    shown = shortlister.shortlist("split the rent with my housemate", (), transfers, menu)
    assert shown is not None and shown.children == ("split_rent",)
    # a leaf the run called counts as absent, as in the prior
    again = shortlister.shortlist("split the rent with my housemate",
                                  ("transfers/split_rent",), transfers, menu)
    assert again is None or "split_rent" not in again.children


def test_a_shortlisted_wrong_branch_is_left_by_the_backtrack_rule() -> None:
    tree = house_tree()

    def logits(prompt: Prompt, options: tuple[str, ...]) -> dict[str, float]:
        if "transfers" in options and not prompt.messages[-1].content.startswith("transfers"):
            return {"transfers": 60.0}  # the model opens the wrong branch first
        return {"split_rent": 60.0}  # and, left alone, would call a wrong leaf there

    engine = LogitEngine(logits)
    recovery = RecoveryOptions(is_fallback_enabled=False, is_finish_enabled=False,
                               backtrack_gap=0.0)
    options = RouterOptions(recovery=recovery, speculation=DraftSource.OFF,
                            shortlist=ShortlistOptions(margin=0.0, max_options=1))
    machine = build_machine(tree, engine, options=options, evidence=evidence_source(tree))
    state = run_query(machine, Query(id="t", query="pay the water bill", gold=(), args=None,
                                     tags=()))
    routes = [(e.path, e.decision, e.menu, e.detail) for e in state.trace
              if e.kind.value == "route"]
    assert routes[1][0] == "transfers" and "OTHER" in routes[1][2]  # shortlisted
    # the evidence is better outside: the backtrack rule answers BACK, as in a full menu
    assert routes[1][1] == "BACK" and "backtrack" in routes[1][3]
    assert [c["path"] for c in state.calls] == ["billing/pay_water"]
