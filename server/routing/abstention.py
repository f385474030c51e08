"""No call when nothing fits: the check a run passes before its first leaf call.

The evidence prior ranks leaves against each other, so it cannot tell a request no leaf serves
from one a leaf serves badly; a near miss (a sibling of the right tool, the right tool absent)
scores like a hit. Before a run's first call, this check asks the model what the evidence
cannot see: whether the chosen leaf does what the request asks, as a constrained choice
between `yes` and `no` over a one-question menu (`judgement_prompt`), and the same question
for a content-free request (`NEUTRAL_REQUEST`, once per leaf), whose answer is the model's
taste for that leaf regardless of the request. The decision combines, linearly:
- `judge`: log p(yes) - log p(no) for the request;
- `contrast`: `judge` minus the same for the content-free request;
- `score`: the evidence's score of the chosen leaf;
- `margin`: the evidence's best leaf score minus the second best;
- `lead`: the evidence's best leaf score minus the catalog's `LEAD_RANK`-th best (the last,
  in a smaller catalog): how far the best leaf stands out of the crowd. A short request, or
  one whose values are words no tool holds, scores low against every leaf, yet its tool
  still stands out; a request no leaf serves scores its best leaf like the next ten;
- `values`: how well the request holds the values the leaf needs (`value_coverage`: the
  lowest prior among its required values, no model call): a request for something the leaf
  does not do seldom holds them;
- `named`: the share of the leaf's name words the request says (`lexical.name_share`): a
  near miss lands near a sibling's embedding, yet seldom says the sibling's name ("start the
  game server" for `joinGameServer`);
with weights and a threshold fitted on dev splits (`server/tools/abstention_fit.py`, written
into the model's calibration file as its `abstention` object). Below the threshold the run
*abstains*: the leaf is not called, and the run unwinds with no model call (`BACK` in every
frame up to the root, `DONE` there: the plan's `ABSTAINED` source), ending with no call.
A check whose fit gives the model's answers no weight does not ask them (`is_judge_enabled`,
`is_contrast_enabled`): it costs no model call.

>>> options = AbstentionOptions(judge_weight=1.0, contrast_weight=0.0, score_weight=10.0,
...                             margin_weight=0.0, values_weight=0.5, bias=-3.0, threshold=0.0)
>>> x = AbstentionFeatures(judge=-2.0, contrast=0.0, score=0.3, margin=0.1, values=0.0,
...                        lead=0.2, named=1.0)
>>> options.fit(x), options.abstains(x)
(-2.0, True)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.menu import CompletionState
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.trace import TraceEvent
from stackroute.runtime.tree import Node
from stackroute.runtime.usage import Usage
from stackroute.server.embeddings.leaf_index import EvidenceSource
from stackroute.server.embeddings.lexical import name_share
from stackroute.server.embeddings.words import name_words
from stackroute.server.engines.base import Engine
from stackroute.server.routing.arguments.filling import value_coverage
from stackroute.server.routing.arguments.menus import ValueMenus
from stackroute.server.routing.calibration_file import CalibrationFile
from stackroute.server.routing.judgement_store import JudgementStore
from stackroute.server.routing.known_fields import from_known_fields
from stackroute.server.routing.lru import Lru
from stackroute.server.routing.recovery import MenuStep

YES, NO = "yes", "no"
DETAIL_KEY = "abstention"  # a routing event's record of the check (`Verdict.detail`)
NEUTRAL_REQUEST = "N/A"
MAX_LOG_ODDS = 20.0  # a certain answer is not infinitely certain
LEAD_RANK = 10  # `lead`: the best leaf's score over this rank's (1 = the best itself)
JUDGE_SYSTEM = ("You check whether a tool can do what a user asks. Answer yes only when the "
                "tool does exactly what the request asks for; otherwise answer no.")
_SWITCHES = ("is_judge_enabled", "is_contrast_enabled")


@dataclass(frozen=True, kw_only=True)
class AbstentionOptions:
    """The fitted decision: abstain when `fit(features) < threshold`. Frozen; `from_dict`
    rejects unknown keys."""

    judge_weight: float = 0.0
    contrast_weight: float = 0.0
    score_weight: float = 0.0
    margin_weight: float = 0.0
    values_weight: float = 0.0
    lead_weight: float = 0.0
    named_weight: float = 0.0
    bias: float = 0.0
    threshold: float = 0.0
    is_judge_enabled: bool = True  # ask the model about the request (one call per run)
    is_contrast_enabled: bool = True  # ask the content-free question (one call per leaf)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _SWITCHES:
                if not isinstance(value, bool):
                    raise InputError(f"abstention {f.name} must be true or false, "
                                     f"got {value!r}")
            elif not isinstance(value, int | float) or isinstance(value, bool) or \
                    math.isnan(value) or (math.isinf(value) and f.name != "threshold"):
                raise InputError(f"abstention {f.name} must be a finite number, got {value!r}")

    def fit(self, x: AbstentionFeatures) -> float:
        """The decision's value: above `threshold` the leaf is called."""
        total = sum(float(getattr(self, f"{f.name}_weight")) * float(getattr(x, f.name))
                    for f in fields(x))
        return round(total + self.bias, 6)

    def abstains(self, x: AbstentionFeatures) -> bool:
        return self.fit(x) < self.threshold

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AbstentionOptions:
        return from_known_fields(cls, data, what="abstention option")


@dataclass(frozen=True)
class AbstentionFeatures:
    judge: float  # log p(yes) - log p(no), the request against the chosen leaf
    contrast: float  # judge minus the content-free request's judge for the same leaf
    score: float  # the evidence's score of the chosen leaf
    margin: float  # the evidence's best leaf score minus its second best
    values: float  # value_coverage: the request's values for the leaf's required properties
    lead: float  # the evidence's best leaf score minus its LEAD_RANK-th best
    named: float  # name_share: the share of the leaf's name words the request says

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 6) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AbstentionFeatures:
        """A recorded feature set; one recorded before a feature existed is refused by name."""
        lacking = [f.name for f in fields(cls) if f.name not in data]
        if lacking:
            raise InputError(f"abstention features lack {', '.join(lacking)} (recorded before "
                             f"they existed: probe again); got {sorted(data)}")
        return from_known_fields(cls, data, what="abstention feature")


@dataclass(frozen=True)
class Verdict:
    """The check's answer for one run's first leaf, and what asking cost."""

    leaf: str  # the leaf's path
    features: AbstentionFeatures
    fit: float
    threshold: float  # the fitted decision's: below it the run abstains
    is_abstaining: bool
    usage: Usage = field(default_factory=Usage)

    def detail(self) -> dict[str, Any]:
        threshold = self.threshold if math.isfinite(self.threshold) else None  # the probe's
        return {"leaf": self.leaf, "fit": self.fit, "threshold": threshold,
                "abstain": self.is_abstaining, "features": self.features.to_dict(),
                "model_calls": self.usage.model_calls}


@dataclass(frozen=True)
class Declined:
    """Why a run made no call: the leaf the check stopped, its fit and the bar it missed."""

    leaf: str  # the stopped leaf's path
    fit: float
    threshold: float | None  # None: a probe's (it stops every run)


def declined(events: Iterable[TraceEvent]) -> Declined | None:
    """The check's stop among a run's routing events (`Verdict.detail`), None where it
    stopped nothing.

    >>> from stackroute.runtime.trace import EventKind
    >>> stop = TraceEvent(seq=1, kind=EventKind.ROUTE, frame_id=0, parent_id=None, path="",
    ...     detail={"abstention": {"leaf": "bank/send", "fit": -2.5, "threshold": -1.0,
    ...                            "abstain": True}})
    >>> declined([stop])
    Declined(leaf='bank/send', fit=-2.5, threshold=-1.0)
    """
    for event in events:
        record = event.detail.get(DETAIL_KEY)
        if isinstance(record, Mapping) and record.get("abstain") and "fit" in record:
            threshold = record.get("threshold")
            return Declined(str(record["leaf"]), float(record["fit"]),
                            None if threshold is None else float(threshold))
    return None


def verdicts(events: Iterable[TraceEvent]) -> tuple[dict[str, Any], ...]:
    """The check's verdicts among a run's routing events, as recorded (`Verdict.detail`), in
    order: what `eval --json` lists per query. An unwinding step's record is no verdict.

    >>> from stackroute.runtime.trace import EventKind
    >>> def route(detail): return TraceEvent(seq=1, kind=EventKind.ROUTE, frame_id=0,
    ...     parent_id=None, path="", detail=detail)
    >>> verdicts([route({"abstention": {"leaf": "bank/send", "fit": 0.4, "threshold": 0.0,
    ...                                 "abstain": False}}),
    ...           route({"abstention": {"unwind": True, "leaf": "bank/send"}}), route({})])
    ({'leaf': 'bank/send', 'fit': 0.4, 'threshold': 0.0, 'abstain': False},)
    """
    return tuple(dict(record) for event in events
                 if isinstance(record := event.detail.get(DETAIL_KEY), Mapping)
                 and "fit" in record)


def leaf_words(leaf: Node) -> str:
    """The leaf as the question shows it: its name in words, then its description.

    >>> leaf_words(Node("getWaterQuality", ("x",), "Water quality of a lake."))
    'get water quality: Water quality of a lake.'
    """
    words = name_words(leaf.name)
    description = " ".join(leaf.description.split())
    return f"{words}: {description}" if description else words


def judgement_prompt(task: str, leaf: Node) -> Prompt:
    """The one-question menu: does `leaf` do what `task` asks?"""
    return Prompt((Message("system", JUDGE_SYSTEM), Message(
        "user", f"Request: {task}\n\nTool: {leaf_words(leaf)}\n\n"
                f"Does this tool do what the request asks? Answer {YES} or {NO}.")))


def _log_odds(probabilities: dict[str, float]) -> float:
    yes, no = probabilities.get(YES, 0.0), probabilities.get(NO, 0.0)
    value = math.log(max(yes, 1e-300)) - math.log(max(no, 1e-300))
    return max(-MAX_LOG_ODDS, min(MAX_LOG_ODDS, value))


class AbstentionCheck:
    """Judges a run's first leaf (`verdict`) and unwinds the runs it stopped (`step`)."""

    def __init__(self, engine: Engine | None, options: AbstentionOptions,
                 evidence: EvidenceSource, *, max_runs: int = 1024,
                 max_leaves: int = 4096, store: JudgementStore | None = None) -> None:
        """`engine` may be None only for a check that asks the model nothing. `store` keeps
        the content-free answers across processes (`judgement_store.py`; None: in memory)."""
        if engine is None and options.is_judge_enabled:
            raise ValueError("this abstention check asks the model (is_judge_enabled): it "
                             "needs an engine")
        self.engine = engine
        self.options = options
        self.evidence = evidence
        self._stopped: Lru[str, Verdict] = Lru(max_entries=max_runs)
        self._neutral: Lru[str, float] = Lru(max_entries=max_leaves)
        self.store = store

    def applies(self, request: RoutingRequest, child: Node | None) -> bool:
        """Only before a run's first call: a run that has called something is in scope."""
        return child is not None and child.is_leaf and not request.calls

    def features(self, task: str, leaf: Node, *,
                 menus: ValueMenus | None = None) -> tuple[AbstentionFeatures, Usage]:
        """The check's inputs for calling `leaf` on `task`, and what asking the model cost;
        `menus`: the leaf's value menus where the caller read them already."""
        usage = Usage()
        judge = contrast = 0.0
        if self.options.is_judge_enabled and self.engine is not None:
            result = self.engine.choose(judgement_prompt(task, leaf), (YES, NO))
            usage = result.usage
            judge = _log_odds(result.probabilities)
        if self.options.is_judge_enabled and self.options.is_contrast_enabled \
                and self.engine is not None:
            neutral = self._neutral.get(leaf.path_str)
            if neutral is None:
                prompt = judgement_prompt(NEUTRAL_REQUEST, leaf)
                neutral = None if self.store is None else self.store.get(prompt)
                if neutral is None:
                    plain = self.engine.choose(prompt, (YES, NO))
                    usage = usage + plain.usage
                    neutral = _log_odds(plain.probabilities)
                    if self.store is not None:
                        self.store.put(prompt, neutral)
                self._neutral.put(leaf.path_str, neutral)
            contrast = judge - neutral
        evidence = self.evidence.for_request(task)
        top = evidence.top(LEAD_RANK)
        row = evidence.index.paths.index(leaf.path_str) \
            if leaf.path_str in evidence.index.paths else -1
        score = float(evidence.scores[row]) if row >= 0 else (top[0][1] if top else 0.0)
        margin = top[0][1] - top[1][1] if len(top) > 1 else 1.0
        lead = top[0][1] - top[-1][1] if len(top) > 1 else 1.0
        return AbstentionFeatures(judge=judge, contrast=contrast, score=score, margin=margin,
                                  values=value_coverage(leaf, task, menus=menus),
                                  lead=lead,
                                  named=name_share(leaf.name, self.evidence.reading(task))), usage

    def verdict(self, request: RoutingRequest, leaf: Node, *,
                menus: ValueMenus | None = None) -> Verdict:
        """Whether the run calls `leaf` or stops; a stopped run is remembered for `step`."""
        x, usage = self.features(request.task, leaf, menus=menus)
        fit = self.options.fit(x)
        verdict = Verdict(leaf=leaf.path_str, features=x, fit=fit,
                          threshold=self.options.threshold,
                          is_abstaining=fit < self.options.threshold, usage=usage)
        if verdict.is_abstaining:
            self._stopped.put(request.run_id, verdict)
        return verdict

    def stop_step(self, request: RoutingRequest, verdict: Verdict,
                  usage: Usage) -> MenuStep:
        """The decision that replaces the leaf call: unwind (BACK) or end (DONE at the root)."""
        return MenuStep(self._unwind_choice(request), None, None, usage,
                        {DETAIL_KEY: verdict.detail()})

    def step(self, request: RoutingRequest) -> MenuStep | None:
        """For a run this check stopped: BACK up to the root, DONE there (no model call)."""
        verdict = self._stopped.get(request.run_id)
        if verdict is None or request.calls:
            return None
        choice = self._unwind_choice(request)
        if choice == CompletionState.DONE.value:
            self._stopped.pop(request.run_id)
        return MenuStep(choice, None, None, Usage(),
                        {DETAIL_KEY: {"unwind": True, "leaf": verdict.leaf}})

    @staticmethod
    def _unwind_choice(request: RoutingRequest) -> str:
        menu = request.menu
        if request.node.depth == 0 and CompletionState.DONE.value in menu:
            return CompletionState.DONE.value
        if CompletionState.BACK.value in menu:
            return CompletionState.BACK.value
        if CompletionState.DONE.value in menu:
            return CompletionState.DONE.value
        raise RuntimeError(f"menu at {request.node.path_str or '<root>'} offers neither DONE "
                           f"nor BACK: {list(menu.options)}")


@dataclass(frozen=True)
class CalibratedCheck:
    """A calibration file's `abstention` object: the fitted check, and whether routers use
    it when nobody says (`is_default`: set from the test numbers, not assumed)."""

    options: AbstentionOptions
    is_default: bool


def read_abstention(path: Path) -> CalibratedCheck | None:
    return check_of(CalibrationFile.read(path))


def check_of(file: CalibrationFile) -> CalibratedCheck | None:
    """The file's `abstention` object, None where it has none (a model not fitted for it)."""
    section = file.section("abstention")
    if section is None:
        return None
    if not isinstance(section, dict) or not isinstance(section.get("options"), dict) \
            or not isinstance(section.get("is_default", True), bool):
        raise InputError(f"{file.path}: 'abstention' must be an object with an 'options' "
                         "object and a boolean 'is_default'")
    return CalibratedCheck(AbstentionOptions.from_dict(section["options"]),
                           section.get("is_default", True))


def chosen_check(file: CalibrationFile | None, abstain: bool | None) -> AbstentionOptions | None:
    """The check a router uses: `abstain` True: the calibration's, where it has one; False:
    none; None: the calibration's where it says so (`is_default`)."""
    if abstain is False or file is None:
        return None
    check = check_of(file)
    if check is None or (abstain is None and not check.is_default):
        return None
    return check.options


def write_abstention(path: Path, options: AbstentionOptions, measured: dict[str, Any], *,
                     is_default: bool = False) -> None:
    """Set the `abstention` object of the calibration file at `path` (the rest unchanged)."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    data["abstention"] = {"options": options.to_dict(), "is_default": is_default,
                          "measured": measured}
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
