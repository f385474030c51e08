"""Filling a chosen leaf's arguments from the request: one constrained choice per value.

For each property (required first, in schema order) the request's value candidates
(`candidates.py`) are the menu, their priors the option bias, and the model chooses under the
same constraint routing uses (`engine.choose`). A single candidate needs no model call. An
optional property is offered only where the request supports it: it names the property, or
holds a value of its kind (a matched enum word, a date, an e-mail, an unused number, a list of
copyable values), and then with `NONE` on the menu; or (`OptionalValues.MEANING`) some of its
values mean it (`meaning.py`), and then those values alone; otherwise it stays out
(`support.py`). A required property the request holds no candidate for (an object, an array
of free words) is written by the model as free JSON under its schema, one call for all of
them: the fallback; with
`MissingValues.ASK` one a person can type (anything but an object) is left out instead and
named in `missing_values`, for the machine to ask the user (runtime/missing_values.py), as is
a free string or number whose value would have negative log-odds (`ASK_BELOW_PRIOR`). Values
already given to one property are not offered to the next while others remain; to an optional
property never, nor a value the priors' assignment gives another optional one. `NONE` takes
the calibration's log-odds (`none_bias`: the 1.5B said NONE to values the request states).
Where the leaf's schema refused this frame's earlier arguments for it
(`RoutingRequest.refused`), the values it refused for a property are off that property's menu
(`ValueMenus.refusing`), and an answer that would be the same refused call is written again,
whole, as free JSON under the schema (a deterministic choice would repeat it on every retry).

With `ArgumentValues.PRIORS` the values are the stable assignment of the priors
(`assignment.py`: one piece of the request is one value, given to the property it fits best;
`NONE`, at prior 0, wins an optional property whose candidates all have negative log-odds),
with no model call; only the fallback still asks the model. A model whose choices add nothing
to the priors (the 135M default: its calibration says so) saves those calls."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import (
    Prompt,
    answer,
    arguments_overview,
    rest_ask,
    rewrite_ask,
    value_ask,
)
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.tree import Node
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Constraint, Engine, SamplingOptions
from stackroute.server.routing.arguments.assignment import Pick, assigned_picks, clashes
from stackroute.server.routing.arguments.candidates import Candidate, schema_of
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.routing.arguments.menus import ValueMenus
from stackroute.server.routing.arguments.support import Offer, offered
from stackroute.server.routing.options import ArgumentValues, MissingValues

NONE_OPTION = "NONE"
# How far the candidates' priors (log-odds from the request's own evidence: a value's label,
# its kind, its place) move the model's choice. Seal-Tools dev, 17 queries, 29 value choices
# at the gold leaf with SmolLM2 (its unbiased choices recorded, the scale applied after): the
# model alone 2/29 right, scale 1: 15, 1.5: 18, 2 and above: 19 (the priors alone: 19). The
# 1.5B tier, Seal-Tools dev, 200 requests at the gold leaf, the 287 value menus that hold the
# gold value (its unbiased choices recorded, the scale applied after): the model alone 0.920,
# scale 1: 0.927, 2: 0.948, 3: 0.962, 4: 0.955, the priors alone 0.885 (scratch scaleprobe.py,
# bench/results/2026-12-06-cpu-right-call-spans/): one scale serves both models.
PRIOR_SCALE = 2.0
# `MissingValues.ASK`: a required string or number is asked too where the value it would take
# (the assignment's, with `priors`; else the best candidate) has negative log-odds: the request
# holds words or numbers, none of them this value. Seal-Tools dev, the gold leaf, 200 requests
# (bench missing-values): with each required value cut out of its request (288 variants), the
# no-candidate rule alone asked for 34 (numbers only: every string has some span), the best
# candidate below 0 for 100, the assigned value below 0 for 116 (48 of 53 numbers, 68 of 235
# strings); the intact requests asked 3 times (1 for values the request does not hold, 2 for
# values it does). Below 0.5: 20 of the intact requests' 330 string and number values. Later
# candidate fixes (a span holding a sibling's name, an empty quote, plain words for an id,
# naming words as filler) raised it to 152 (104 of 235 strings), the intact requests asking 4
# times (the new one on a garbled request, dev-easy-78), exact calls at the gold leaf the same
# (bench/results/2026-12-05-cpu-missing-values-labels/).
ASK_BELOW_PRIOR = 0.0
# `value_coverage`'s range: a value's prior is log-odds; beyond these it says no more.
COVERAGE_FLOOR, COVERAGE_CAP = -4.0, 4.0

@dataclass
class ValueChoice:
    """How one property got its value (or was left out)."""

    name: str
    source: str  # single | model | prior | fallback | missing | omitted | unsupported
    num_candidates: int
    value: Any = None
    probability: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "source": self.source,
                               "num_candidates": self.num_candidates}
        if self.source in ("single", "model", "prior", "fallback"):
            out["value"] = self.value
        if self.probability is not None:
            out["probability"] = round(self.probability, 4)
        return out


@dataclass
class FilledArguments:
    arguments: dict[str, Any]
    text: str  # the arguments as JSON (or the fallback's unparsable text)
    finish_reason: str
    usage: Usage = field(default_factory=Usage)
    choices: list[ValueChoice] = field(default_factory=list)
    fallback: str | None = None  # "free_text" where the model wrote some values as JSON

    def written_values(self) -> tuple[str, ...]:
        """The required properties the model wrote as free JSON (the fallback) instead of
        choosing from the request's values: it held none, or the engine answered outside
        the menu."""
        return tuple(c.name for c in self.choices if c.source == "fallback")

    def missing_values(self) -> tuple[str, ...]:
        """The required properties the request held nothing for, left out to be asked of the
        user (`MissingValues.ASK`)."""
        return tuple(c.name for c in self.choices if c.source == "missing")


class ArgumentFiller:
    """Arguments for a chosen leaf, value by value, from the request's candidates."""

    def __init__(self, engine: Engine, *, missing: MissingValues,
                 max_argument_tokens: int = 384,
                 values: ArgumentValues = ArgumentValues.MODEL,
                 meaning: ValueMeaning | None = None, none_bias: float = 0.0) -> None:
        self.engine = engine
        self.none_bias = none_bias  # NONE's log-odds on an optional value's menu
        self.max_argument_tokens = max_argument_tokens
        self.values = values
        self.missing = missing
        self.meaning = meaning  # None: optional values by the request's words only

    def fill(self, request: RoutingRequest, leaf: Node, *,
             menus: ValueMenus | None = None) -> FilledArguments:
        """`leaf`'s arguments for `request`; `menus`: its value menus where the caller read
        them already (the router shares them with the abstention check)."""
        schema: Mapping[str, Any] = leaf.parameters or {}
        properties: Mapping[str, Any] = schema.get("properties") or {}
        read = ValueMenus.read(leaf, request.task) if menus is None \
            else menus.checked(leaf, request.task)
        refused = [r for r in request.refused if r.leaf == leaf.path_str]
        read = read.refusing(refused)
        if self.meaning is not None:  # "robbed" for `stolen`
            read = read.meant(properties, self.meaning)
        required, order = list(read.required), list(read.order)
        filled = FilledArguments(arguments={}, text="{}", finish_reason="stop")
        conversation = _Conversation(request, leaf)
        rest: list[str] = []
        by_priors = self.values is ArgumentValues.PRIORS
        # where the model chooses, the values the assignment gives optional properties: no
        # other optional property is offered one ("checkout to 2027-09-13" is new_check_out's,
        # not new_check_in's, though new_check_in is asked first); read only where two optional
        # properties have candidates to contest (the assignment asks `meaning` of them)
        contested = sum(1 for n in order if n not in required and read.by_property[n]) > 1
        picks = assigned_picks(read.by_property, required, properties, request.task,
                               meaning=self.meaning) if by_priors or contested else {}
        claims = {} if by_priors else {n: p.candidate for n, p in picks.items()
                                       if n not in required and p.candidate is not None}
        used: set[str] = set()
        for name in order:
            prop = schema_of(properties[name])
            is_required = name in required
            found = read.by_property[name]
            if by_priors:
                fresh = found
            elif is_required:  # a value may serve two required properties
                fresh = [c for c in found if c.text not in used] or found
            else:  # an optional one takes a value no other property has or fits better
                fresh = [c for c in found if c.text not in used and not any(
                    clashes(c, o) for n, o in claims.items() if n != name)]
            if is_required and self.missing is MissingValues.ASK and _is_missing(
                    prop, _taken(picks.get(name)) if by_priors and name in picks else fresh):
                filled.choices.append(ValueChoice(name, "missing", len(fresh)))
                continue
            if not fresh:
                if is_required:
                    rest.append(name)
                filled.choices.append(ValueChoice(name, "fallback" if is_required
                                                  else "unsupported", 0))
                continue
            offer = Offer(fresh, may_decline=not is_required) if is_required or by_priors \
                else offered(name, properties, fresh, request.task, used, self.meaning)
            if not is_required and not (name in picks if by_priors else offer.candidates):
                filled.choices.append(ValueChoice(name, "unsupported", len(fresh)))
                continue
            fresh = offer.candidates
            chosen, probability, usage, is_outside = self._choose(
                conversation, name, fresh, may_decline=offer.may_decline,
                pick=picks.get(name) if by_priors else None)
            filled.usage = filled.usage + usage
            if is_outside and is_required:  # an engine that ignored the menu: write it
                rest.append(name)
                filled.choices.append(ValueChoice(name, "fallback", len(fresh)))
                continue
            if chosen is None:
                filled.choices.append(ValueChoice(name, "omitted", len(fresh), None, probability))
                continue
            filled.arguments[name] = chosen.value
            used.add(chosen.text)
            source = "single" if len(fresh) == 1 and not offer.may_decline \
                else "prior" if by_priors else "model"
            filled.choices.append(ValueChoice(name, source, len(fresh), chosen.value,
                                              probability))
        if rest:
            self._free_text(conversation, schema, rest, filled)
        elif filled.arguments or not properties:
            filled.text = json.dumps(filled.arguments, ensure_ascii=False)
        if any(r.arguments == filled.arguments for r in refused) \
                and not filled.missing_values():
            # the same call the schema refused (its problem is the object as a whole, or a
            # value no menu offered): the model writes it again, whole, under the schema
            self._rewrite(request, leaf, schema, filled)
        return filled

    def _choose(self, conversation: _Conversation, name: str, found: list[Candidate], *,
                may_decline: bool, pick: Pick | None = None,
                ) -> tuple[Candidate | None, float | None, Usage, bool]:
        """The chosen candidate (None: NONE), its probability, the cost, and whether the
        engine answered outside the menu (a remote engine may ignore the constraint). With
        `pick` (ArgumentValues.PRIORS) the assignment's value is taken, no model call."""
        options = [c.text for c in found]
        bias = {c.text: c.prior * PRIOR_SCALE for c in found}
        if may_decline and NONE_OPTION not in bias:
            options.append(NONE_OPTION)
            bias[NONE_OPTION] = self.none_bias
        prompt = conversation.ask(value_ask(name, is_optional=may_decline))
        if len(options) == 1:
            conversation.answered(options[0])
            return found[0], None, Usage(), False
        if pick is not None:
            conversation.answered(pick.candidate.text if pick.candidate else NONE_OPTION)
            return pick.candidate, None, Usage(), False
        result = self.engine.choose(prompt, options, option_bias=bias)
        probability = result.probabilities.get(result.choice)
        if result.choice not in bias:
            conversation.unask()
            return None, None, result.usage, True
        conversation.answered(result.choice)
        if result.choice == NONE_OPTION:
            return None, probability, result.usage, False
        chosen = next(c for c in found if c.text == result.choice)
        return chosen, probability, result.usage, False

    def _free_text(self, conversation: _Conversation, schema: Mapping[str, Any],
                   names: list[str], filled: FilledArguments) -> None:
        properties = schema.get("properties") or {}
        narrowed = {"type": "object", "properties": {n: properties[n] for n in names},
                    "required": names, "additionalProperties": False}
        written = self._write(conversation.ask(rest_ask(names), whole=not filled.arguments),
                              narrowed, filled)
        if written is None:
            return
        for choice in filled.choices:
            if choice.name in written and choice.source == "fallback":
                choice.value = written[choice.name]
        filled.arguments.update({k: v for k, v in written.items() if k in names})
        ordered = {n: filled.arguments[n] for n in (schema.get("properties") or {})
                   if n in filled.arguments}
        filled.arguments = ordered
        filled.text = json.dumps(ordered, ensure_ascii=False)

    def _rewrite(self, request: RoutingRequest, leaf: Node, schema: Mapping[str, Any],
                 filled: FilledArguments) -> None:
        """`filled` replaced by the arguments the model writes as one JSON object under the
        leaf's whole schema, after the prompt's record of the schema's refusal."""
        conversation = _Conversation(request, leaf)
        written = self._write(conversation.ask(rewrite_ask(), whole=True), schema, filled)
        if written is None:
            return
        filled.arguments = written
        filled.choices = [ValueChoice(n, "fallback", 0, v) for n, v in written.items()]
        filled.text = json.dumps(written, ensure_ascii=False)

    def _write(self, prompt: Prompt, schema: Mapping[str, Any],
               filled: FilledArguments) -> dict[str, Any] | None:
        """The JSON object the model writes under `schema`, its cost counted in `filled`; None
        where it is cut off or no object (its text kept: the machine records the misstep)."""
        generation = self.engine.generate(
            prompt, constraint=Constraint.json(schema),
            sampling=SamplingOptions(max_tokens=self.max_argument_tokens))
        filled.usage = filled.usage + generation.usage
        filled.fallback = "free_text"
        filled.finish_reason = generation.finish_reason
        try:
            written = json.loads(generation.text)
        except json.JSONDecodeError:
            written = None
        if not isinstance(written, dict):
            filled.text = generation.text
            return None
        return written


def value_coverage(leaf: Node, task: str, *, menus: ValueMenus | None = None) -> float:
    """How well `task` holds the values `leaf` needs: the lowest prior among the values the
    stable assignment of the priors gives its required properties (one a person types: not an
    object), each clipped to [COVERAGE_FLOOR, COVERAGE_CAP]; a property given none counts
    COVERAGE_FLOOR; a leaf that needs no such value, COVERAGE_CAP. No model call. A request
    for something the leaf does not do seldom holds the values it needs, so the abstention
    check weighs this beside the evidence (`abstention.py`). `menus`: the leaf's value menus
    where the caller read them already.

    >>> leaf = Node("send_money", ("payments",), "Send money to a payee.", parameters={
    ...     "type": "object", "required": ["payee", "amount"],
    ...     "properties": {"payee": {"type": "string"}, "amount": {"type": "number"}}})
    >>> [value_coverage(leaf, t) for t in ("Send 500 dollars to Asha", "Send money to Asha",
    ...                                    "Hi there, how are you doing today?")]
    [1.0, -4.0, -4.0]
    """
    schema: Mapping[str, Any] = leaf.parameters or {}
    properties: Mapping[str, Any] = schema.get("properties") or {}
    if not schema.get("required") and not schema.get("anyOf") and not schema.get("oneOf"):
        return COVERAGE_CAP
    read = ValueMenus.read(leaf, task) if menus is None else menus.checked(leaf, task)
    typed = [n for n in read.required if not _is_object(schema_of(properties[n]))]
    if not typed:
        return COVERAGE_CAP
    picks = assigned_picks(read.by_property, list(read.required), properties, task)
    priors = [p.candidate.prior if (p := picks.get(n)) and p.candidate else COVERAGE_FLOOR
              for n in typed]
    return max(COVERAGE_FLOOR, min(COVERAGE_CAP, min(priors)))


def _is_object(prop: Mapping[str, Any]) -> bool:
    return prop.get("type") == "object" or "properties" in prop


def _taken(pick: Pick | None) -> list[Candidate]:
    """The value the assignment gives a property, as the candidates it could be asked over."""
    return [] if pick is None or pick.candidate is None else [pick.candidate]


def _is_missing(prop: Mapping[str, Any], found: list[Candidate]) -> bool:
    """Whether a required value is to be asked of the user (`MissingValues.ASK`): the request
    holds no candidate for it, or (a free string or number) none with non-negative log-odds.
    Never an object, which a person does not type: the model writes it under its schema.

    >>> _is_missing({"type": "object", "properties": {}}, []), _is_missing({"type": "number"}, [])
    (False, True)
    """
    if _is_object(prop):
        return False
    if not found:
        return True
    is_free = prop.get("type") in ("string", "number", "integer") and "enum" not in prop \
        and "const" not in prop
    return is_free and max(c.prior for c in found) < ASK_BELOW_PRIOR


class _Conversation:
    """The arguments turns, append-only: the overview with the first ask, then one answer
    and one ask per value, so each value's prompt extends the previous one's."""

    def __init__(self, request: RoutingRequest, leaf: Node) -> None:
        self.request = request
        self.leaf = leaf
        self.prompt: Prompt = request.prompt.extend(answer(leaf.name))
        self.is_opened = False

    def ask(self, question: str, *, whole: bool = False) -> Prompt:
        if not self.is_opened:
            self.is_opened = True
            turn = arguments_overview(self.leaf, self.request.task,
                                      ask=None if whole else question)
            self.prompt = self.prompt.extend(turn)
        else:
            self.prompt = self.prompt.extend(Message("user", question))
        return self.prompt

    def answered(self, option: str) -> None:
        self.prompt = self.prompt.extend(answer(option))

    def unask(self) -> None:
        """Take back the last ask (it got no answer from the menu)."""
        self.prompt = Prompt(self.prompt.messages[:-1])
        if len(self.prompt.messages) == len(self.request.prompt.messages) + 1:
            self.is_opened = False
