"""A shortlisted frame: its opening turn shows the shortlister's options and OTHER; OTHER appends
the full menu to the same frame, so every routing call still extends the previous one (tier a,
scripted router and shortlister)."""

from __future__ import annotations

import pytest
from machine_kit import (
    RecordingRouter,
    check_prefix_discipline,
    drive,
    make_machine,
    route_menus,
)
from stackroute.runtime.menu import CompletionState, Menu, Shortlist, frame_menu
from stackroute.runtime.prompt import answer
from stackroute.runtime.router import ScriptedRouter
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import Node


class ScriptedShortlister:
    """Shortlists the frames named in `shown` (node path -> options); records every ask."""

    def __init__(self, shown: dict[str, tuple[str, ...]]) -> None:
        self.shown = shown
        self.asked: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []

    def shortlist(self, task: str, calls: tuple[str, ...], node: Node,
                  menu: Menu) -> Shortlist | None:
        self.asked.append((node.path_str, calls, menu.options))
        options = self.shown.get(node.path_str)
        return None if options is None else Shortlist(children=options, margin=0.2)


def shortlisted_run(script: list, shown: dict[str, tuple[str, ...]]
                    ) -> tuple[RunState, list, ScriptedShortlister]:
    router = RecordingRouter(ScriptedRouter(script))
    machine = make_machine(router)
    shortlister = ScriptedShortlister(shown)
    machine.shortlister = shortlister
    state = machine.start("show my balance")
    drive(machine, state)
    return state, router.prompts, shortlister


def test_other_opens_the_full_menu_in_the_same_frame_and_keeps_the_prefix() -> None:
    state, prompts, shortlister = shortlisted_run(
        ["payments", "OTHER", "balance", "DONE", "DONE"], {"payments": ("send_money",)})
    assert state.status.value == "done"
    assert [c["path"] for c in state.calls] == ["payments/balance"]
    assert route_menus(state)[:3] == [
        ("", ("payments", "accounts", "weather", "DONE"), "payments"),
        ("payments", ("send_money", "OTHER", "BACK"), "OTHER"),
        ("payments", ("send_money", "balance", "BACK"), "balance"),
    ]
    check_prefix_discipline(state, prompts)
    # the shortlisted call's prompt, then OTHER and the full menu turn: appended, in order
    shortlisted, full = prompts[1].messages, prompts[2].messages
    assert full[:len(shortlisted)] == shortlisted
    assert full[len(shortlisted)] == answer("OTHER")
    opening, after_other = shortlisted[-1].content, full[len(shortlisted) + 1].content
    assert "Likely options:\n- send_money: Send money to a contact." in opening
    assert "- OTHER: none of these; show every option here" in opening
    assert "balance" not in opening
    assert "Options:\n- send_money" in after_other and "- balance: Show the balance." in after_other
    assert "OTHER" not in after_other
    # asked once per pushed frame (root and payments), never again after OTHER
    assert [a[0] for a in shortlister.asked] == ["", "payments"]
    push = next(e for e in state.trace if e.kind.value == "push")
    assert push.detail["shortlist"] == {"options": ["send_money"], "margin": 0.2}


def test_a_shown_option_is_taken_and_the_frame_keeps_its_shortlist_after_the_call() -> None:
    state, prompts, _ = shortlisted_run(
        ["payments", "balance", "DONE", "DONE"], {"payments": ("balance",)})
    assert [c["path"] for c in state.calls] == ["payments/balance"]
    menus = route_menus(state)
    assert menus[1] == ("payments", ("balance", "OTHER", "BACK"), "balance")
    assert menus[2] == ("payments", ("balance", "OTHER", "DONE"), "DONE")
    check_prefix_discipline(state, prompts)


def test_a_hidden_option_is_a_misstep_until_other_opens_the_menu() -> None:
    state, prompts, _ = shortlisted_run(
        ["payments", "balance", "OTHER", "balance", "DONE", "DONE"],
        {"payments": ("send_money",)})
    assert state.num_format_failures == 1
    misstep = next(e for e in state.trace if e.kind.value == "misstep")
    assert "'balance' is not one of ['send_money', 'OTHER', 'BACK']" in misstep.error
    assert [c["path"] for c in state.calls] == ["payments/balance"]
    check_prefix_discipline(state, prompts)


def test_a_shortlisted_state_round_trips_and_resumes_where_it_was() -> None:
    router = RecordingRouter(ScriptedRouter(["payments", "OTHER", "balance", "DONE", "DONE"]))
    machine = make_machine(router)
    machine.shortlister = ScriptedShortlister({"payments": ("send_money",)})
    state = machine.start("show my balance", run_id="r")
    machine.step(state)  # payments: the shortlisted frame is pushed
    data = state.to_dict()
    assert data["stack"][-1]["shortlist"] == ["send_money"]
    resumed = RunState.from_dict(data)
    assert resumed.top().shortlist == ("send_money",)
    assert machine.menu_for(resumed, resumed.top()).options == ("send_money", "OTHER", "BACK")
    drive(machine, resumed)
    assert [c["path"] for c in resumed.calls] == ["payments/balance"]


def test_start_at_an_inner_node_shortlists_only_the_target_frame() -> None:
    machine = make_machine(["DONE"])
    shortlister = ScriptedShortlister({"": ("weather",), "accounts": ("statements",)})
    machine.shortlister = shortlister
    state = machine.start("a statement", at="accounts")
    assert [a[0] for a in shortlister.asked] == ["accounts"]
    assert state.stack[0].shortlist is None and state.top().shortlist == ("statements",)
    assert machine.request_for(state).menu.options == ("statements", "OTHER", "BACK")


@pytest.mark.parametrize(("depth", "has_output", "states"), [
    (0, False, ("OTHER", "DONE")), (1, False, ("OTHER", "BACK")), (1, True, ("OTHER", "DONE"))])
def test_frame_menu_offers_other_first_among_the_states(depth: int, has_output: bool,
                                                        states: tuple[str, ...]) -> None:
    menu = frame_menu(path="p", child_names=("a", "b", "c"), depth=depth, tried=("b",),
                      has_output=has_output, shortlist=("b", "c"))
    assert menu.children == ("c",)  # shown and not abandoned
    assert tuple(s.value for s in menu.states) == states and menu.is_shortlisted
    full = frame_menu(path="p", child_names=("a", "b"), depth=1, tried=(), has_output=False,
                      shortlist=None)
    assert full.options == ("a", "b", "BACK") and not full.is_shortlisted
    assert CompletionState.OTHER not in full.states


def test_an_empty_shortlist_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one option"):
        Shortlist(children=(), margin=0.1)


def test_a_predicted_descent_opens_the_child_shortlisted_as_the_machine_does() -> None:
    from stackroute.runtime.speculation import descend, matches

    machine = make_machine(["payments"])
    machine.shortlister = ScriptedShortlister({"payments": ("balance",)})
    state = machine.start("show my balance", run_id="r")
    predicted = descend(machine.request_for(state), "payments")
    machine.step(state)
    actual = machine.request_for(state)
    assert predicted.menu.options == ("balance", "OTHER", "BACK")
    assert matches(predicted, actual)
    machine.shortlister = None  # without a shortlister: the full menu, as before
    assert descend(machine.request_for(machine.start("x")), "payments").menu.options == (
        "send_money", "balance", "BACK")
