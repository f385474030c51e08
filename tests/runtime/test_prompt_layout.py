"""The append-only prompt layout: each routing call extends the previous one; a pop returns
to the parent's exact prefix plus the result turn (tier a/b)."""

from __future__ import annotations

from typing import Any

import pytest
from machine_kit import (
    RecordingRouter,
    bank_tree,
    check_prefix_discipline,
    counting_clock,
    drive,
    make_machine,
)
from stackroute.runtime.governance import Limits
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import SYSTEM_TEXT, PromptLayout, PromptOrder, PromptStyle
from stackroute.runtime.router import RoutingRequest, ScriptedRouter

ROOT_MENU_TURN = (
    "You are at the top level.\nOptions:\n"
    "- payments: Send, receive and track payments.\n"
    "- accounts: Open accounts and read statements.\n"
    "- weather: Weather for a city. (arguments: city)\n"
    "- DONE: the request is fully handled, or nothing here applies\n"
    "Answer with one option name."
)
ACCOUNTS_MENU_TURN = (
    "You are at accounts. Open accounts and read statements.\nOptions:\n"
    "- open_account: Open a new account. (arguments: kind)\n"
    "- statements: Account statements.\n"
    "- DONE: the request is handled at this level; return\n"
    "- BACK: nothing here fits the request; go back up\n"
    "Answer with one option name."
)
def open_account_args(request: str) -> str:
    return ('Schema of open_account\'s arguments: {"type":"object","properties":{"kind":{"enum":'
            '["savings","checking"]}},"required":["kind"]}\nRequest: "' + request + '"\nWrite '
            'the JSON arguments, copying the values from the request.')


def recorded_run(script: list[Any], *, run_id: str = "run-1", limits: Limits | None = None,
                 clock_start: float = 1_000.0, reject: bool = False,
                 order: PromptOrder | None = None) -> tuple[Any, list[Any]]:
    """A scripted run's routing prompts, in the default prompt order unless `order`."""
    router = RecordingRouter(ScriptedRouter(script))
    machine = make_machine(router, limits=limits, clock=counting_clock(clock_start))
    if order is not None:
        machine.layout = PromptLayout(machine.tree, PromptStyle(order=order))
    state = machine.start("open a savings account", run_id=run_id)
    drive(machine, state, gate=lambda pending: not reject)
    return state, router.prompts


def test_prompts_exact_for_a_small_run() -> None:
    state, prompts = recorded_run(["payments", "BACK", "accounts",
                                   ("open_account", {"kind": "savings"}), "DONE", "DONE"],
                                  order=PromptOrder.REQUEST_FIRST)
    header = (Message("system", SYSTEM_TEXT),
              Message("user", "Request: open a savings account\n\n" + ROOT_MENU_TURN))
    a = Message("assistant", "accounts")
    back = Message("user", "payments: nothing there fits.\nAnswer with the next option, or DONE.")
    opened = [Message("assistant", "open_account"),
              Message("user", open_account_args("open a savings account")),
              Message("assistant", '{"kind":"savings"}'),
              Message("user", 'open_account returned: {"account": "savings-1"}\n'
                              'Answer with the next option, or DONE.')]
    done = Message("user", 'accounts finished: [{"call": "accounts/open_account", "status": '
                           '"ok"}]\nAnswer with the next option, or DONE.')
    assert [p.messages for p in prompts] == [
        header,
        (*header, Message("assistant", "payments"), Message("user", (
            "You are at payments. Send, receive and track payments.\nOptions:\n"
            "- send_money: Send money to a contact. (arguments: payee, amount)\n"
            "- balance: Show the balance.\n"
            "- DONE: the request is handled at this level; return\n"
            "- BACK: nothing here fits the request; go back up\n"
            "Answer with one option name."))),
        (*header, Message("assistant", "payments"), back),
        (*header, Message("assistant", "payments"), back, a, Message("user", ACCOUNTS_MENU_TURN)),
        (*header, Message("assistant", "payments"), back, a, Message("user", ACCOUNTS_MENU_TURN),
         *opened),
        (*header, Message("assistant", "payments"), back, a, done),
    ]
    assert check_prefix_discipline(state, prompts) == 2


SCENARIO = [
    "payments", "BACK",                                 # a wrong branch
    "accounts", "statements", ("monthly", {"month": 13}),  # invalid arguments: a misstep
    ("monthly", {"month": 3}), "DONE",                  # nested pop
    ("open_account", {"kind": "savings"}), "DONE",      # second step of the workflow
    "nope",                                             # an answer outside the menu
    ("weather", {"city": "Oslo"}),
    "DONE",
]


@pytest.mark.parametrize("order", list(PromptOrder))
def test_prefix_discipline_over_a_multi_level_run(order: PromptOrder) -> None:
    state, prompts = recorded_run(SCENARIO, order=order)
    assert state.status.value == "done"
    assert state.num_format_failures == 2
    assert check_prefix_discipline(state, prompts) == 3


def test_prefix_discipline_with_gates_depth_refusal_and_forced_pops() -> None:
    script = ["accounts", "statements", ("open_account", {"kind": "savings"}), "DONE",
              "payments", ("send_money", {"payee": "Asha", "amount": 5}), "balance", "balance"]
    for reject in (False, True):
        state, prompts = recorded_run([*script, "DONE"], reject=reject,
                                      limits=Limits(max_depth=2, max_iterations=3))
        kinds = [e.kind.value for e in state.trace]
        assert "limit" in kinds and ("gate_reject" in kinds) is reject
        assert check_prefix_discipline(state, prompts) == 2


def test_prompts_hold_no_run_id_or_time() -> None:
    first_state, first = recorded_run(SCENARIO, run_id="run-aaaa-1111", clock_start=5.0)
    second_state, second = recorded_run(SCENARIO, run_id="run-bbbb-2222", clock_start=9e9)
    assert [p.messages for p in first] == [p.messages for p in second]
    assert first_state.trace[0].time_unix != second_state.trace[0].time_unix
    text = "\n".join(m.content for p in first for m in p.messages)
    for volatile in ("run-aaaa", "1111", "5.0", "run-1", "call_id"):
        assert volatile not in text


def test_flat_style_lists_schemas_and_descriptions_are_clipped() -> None:
    tree = bank_tree()
    layout = PromptLayout(tree, PromptStyle(show_schemas=True, max_description_chars=12))
    turn = layout.menu_turn(tree.node("payments")).content
    assert "- send_money: Send money …" in turn
    assert ('Parameters: {"type":"object","properties":{"payee":{"type":"string"},'
            '"amount":{"type":"number"}},"required":["payee","amount"],'
            '"additionalProperties":false}') in turn
    assert '- balance: Show the ba… Parameters: {}' in turn


def test_arguments_prompt_extends_the_routing_prompt() -> None:
    seen: list[RoutingRequest] = []

    def script(request: RoutingRequest) -> Any:
        seen.append(request)
        return "accounts" if request.step == 0 else "DONE"

    machine = make_machine(script)
    state = machine.start("x", run_id="r")
    machine.step(state)
    machine.step(state)
    request = seen[1]
    leaf = request.child("open_account")
    prompt = request.arguments_prompt(leaf)
    assert prompt.messages[:-2] == request.prompt.messages
    assert prompt.messages[-2:] == (Message("assistant", "open_account"),
                                    Message("user", open_account_args("x")))
    assert machine.layout.arguments_prompt(state, leaf).messages[-1].content == \
        open_account_args("x")
    assert request.prompt.is_prefix_of(prompt) and not prompt.is_prefix_of(request.prompt)
    assert (request.step, request.depth, request.task) == (1, 1, "x")


# -- the menu-first order (issue 29): the root's menu before the request ----------------------
def menu_first_run(script: list[Any], task: str) -> tuple[Any, list[Any]]:
    router = RecordingRouter(ScriptedRouter(script))
    machine = make_machine(router, clock=counting_clock(1_000.0))
    machine.layout = PromptLayout(machine.tree, PromptStyle(order=PromptOrder.MENU_FIRST))
    state = machine.start(task, run_id="run-1")
    drive(machine, state, gate=lambda pending: True)
    return state, router.prompts


def test_menu_first_puts_the_root_menu_in_the_system_message() -> None:
    state, prompts = menu_first_run(["payments", "BACK", "accounts",
                                     ("open_account", {"kind": "savings"}), "DONE", "DONE"],
                                    "open a savings account")
    listing = ROOT_MENU_TURN.removesuffix("\nAnswer with one option name.")
    header = (Message("system", f"{SYSTEM_TEXT}\n\n{listing}"),
              Message("user", "Request: open a savings account\n\nYou are at the top level. "
                              "Answer with one option name."))
    assert prompts[0].messages == header
    assert prompts[3].messages[:2] == header
    assert prompts[3].messages[-1] == Message("user", ACCOUNTS_MENU_TURN)  # inner menus stay
    assert check_prefix_discipline(state, prompts) == 2


def test_menu_first_shares_everything_before_the_request_across_requests() -> None:
    _, first = menu_first_run(SCENARIO, "open a savings account")
    _, second = menu_first_run(["DONE"], "what is the weather in Oslo")
    shared = first[0].messages[0]
    assert all(p.messages[0] == shared for p in (*first, *second))
    assert "- payments:" in shared.content and "Oslo" not in shared.content
    assert first[0].messages[1] != second[0].messages[1]
    # request-first shares only the system text, and its root turn lists the options
    _, old = recorded_run(["DONE"], order=PromptOrder.REQUEST_FIRST)
    assert old[0].messages[0] == Message("system", SYSTEM_TEXT)
    assert "- payments:" in old[0].messages[1].content


def test_menu_first_keeps_prefix_discipline_over_a_multi_level_run() -> None:
    state, prompts = menu_first_run(SCENARIO, "open a savings account")
    assert state.status.value == "done"
    assert check_prefix_discipline(state, prompts) == 3


def test_a_menu_turn_without_a_request_is_the_same_listing_in_both_orders() -> None:
    tree = bank_tree()
    old, new = (PromptLayout(tree, PromptStyle(order=o)) for o in PromptOrder)
    for node in (tree.root, tree.node("accounts")):  # what menu_fit counts
        assert old.menu_turn(node) == new.menu_turn(node)
    assert old.menu_turn(tree.root).content == ROOT_MENU_TURN
    assert new.shared_prefix() != old.shared_prefix()


def test_menu_first_is_the_default_order() -> None:
    assert PromptStyle().order is PromptOrder.MENU_FIRST
    assert PromptLayout(bank_tree()).shared_prefix()[0].content.startswith(SYSTEM_TEXT + "\n\n")
