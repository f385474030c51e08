"""How a router decides, as values: the routing policy, the speculation drafts, and the
options a router is built with. No I/O, nothing heavy: settings and the CLI import this.

>>> options = RouterOptions(recovery=None, speculation=DraftSource.OFF)
>>> options.policy, options.max_argument_tokens, options.unwinding
(<Policy.PLAIN: 'plain'>, 384, False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from stackroute.runtime.prompt import PromptOrder

ABSTENTION_MAX_CALL_LOSS = 0.02  # in-scope successes an abstention fit may stop on dev


if TYPE_CHECKING:
    from stackroute.server.routing.abstention import AbstentionOptions
    from stackroute.server.routing.recovery import RecoveryOptions
    from stackroute.server.routing.shortlist import ShortlistOptions


class Policy(StrEnum):
    """How a menu decision is made (DESIGN.md, "policy")."""

    PLAIN = "plain"  # the model's constrained choice alone (the paper)
    GUIDED = "guided"  # the same choice under the evidence prior, with the calibrated recovery


class ArgumentValues(StrEnum):
    """Who picks each argument value among the request's candidates (arguments/filling.py)."""

    MODEL = "model"  # a constrained choice of the model, the candidates' priors as its bias
    PRIORS = "priors"  # the candidate with the highest prior: no model call


class OptionalValues(StrEnum):
    """Where the request supports an optional property (arguments/support.py): a value the
    request gives but does not label ("on Facebook" for `platform`) is seen only by
    meaning."""

    WORDS = "words"  # it names the property, or holds a value only its kind takes
    MEANING = "meaning"  # or a candidate means it best among the leaf's (arguments/meaning.py)


class MissingValues(StrEnum):
    """What a call does with a required value its request holds nothing for
    (arguments/filling.py): the model cannot take it from the request, so it would make one
    up ("send money to Asha" sends 100)."""

    ASK = "ask"  # left out; the call pauses until the user supplies it (runtime/missing_values.py)
    WRITE = "write"  # the model writes one under the schema, flagged in `written_values`


class DraftSource(StrEnum):
    """Where speculative routing takes the paths it verifies in one pass."""

    OFF = "off"
    EVIDENCE = "evidence"  # the best leaf by leaf evidence
    ROUTES = "routes"  # the route the model took for the same (or a near-identical) request
    BOTH = "both"  # the route cache first, then the evidence


def default_shortlist(*, enabled: bool | None = None,
                      margin: float | None = None) -> ShortlistOptions | None:
    """The settings' shortlist options (`enabled`/`margin` None: the settings' defaults)."""
    from stackroute.server.routing.shortlist import ShortlistOptions

    if not (_setting("shortlist") if enabled is None else enabled):
        return None
    return ShortlistOptions(margin=_setting("shortlist_margin") if margin is None else margin,
                            max_options=_setting("shortlist_max_options"))


def _setting(name: str) -> Any:
    """The product default of setting `name` (settings.py is the one place defaults live;
    imported late: settings imports this module)."""
    from stackroute.server.settings import ServerSettings

    return ServerSettings.default(name)


@dataclass(frozen=True, kw_only=True)
class RouterOptions:
    """`recovery` None routes with the model alone (the plain policy); set, it is the guided
    policy with the mechanisms a calibration turned on (`calibration` names where they came
    from, for the trace). `speculation` verifies drafted paths in one pass; decisions never
    change (plain: `speculator.py`; guided: `path_prefetch.py`). `unwinding` computes the DONE
    answers that pop the stack after a leaf call in one pass where the engine can (plain
    policy only; `unwinding.py`); decisions never change.

    `recovery` and `speculation` have no default: the product's depend on the model's
    calibration (`calibration.router_options`, `ServerSettings.router_options`), so a caller
    says which it means. The other fields default to the settings' values."""

    recovery: RecoveryOptions | None
    speculation: DraftSource
    calibration: str | None = None
    max_argument_tokens: int = field(default_factory=lambda: _setting("max_argument_tokens"))
    # Off by default (settings.py): lossless and 10% fewer model calls on the overlap-32
    # suite, but 4-6% more routing wall time on a 1-thread CPU, where every level's tokens
    # cost their compute (bench/results/2026-12-03-cpu-unwind).
    unwinding: bool = field(default_factory=lambda: _setting("unwinding"))
    # Where the root's menu sits: before the request (shared by every request on a catalog,
    # so its KV is computed once) or after it (runtime/prompt.py, issue 29).
    prompt_order: PromptOrder = field(default_factory=lambda: _setting("prompt_order"))
    # No call when nothing fits: the check before a run's first leaf call (abstention.py),
    # fitted per model; None: off. Guided policy only (it reads the leaf evidence).
    abstention: AbstentionOptions | None = None
    # Guided policy: inner menus open with their best options (+ OTHER) where the evidence is
    # sure by the margin (shortlist.py); None: every menu in full.
    shortlist: ShortlistOptions | None = field(default_factory=lambda: default_shortlist())
    # Who picks argument values among the request's candidates: per model, from its
    # calibration (`calibration.py`); the model's choice where nothing says otherwise.
    argument_values: ArgumentValues = ArgumentValues.MODEL
    # The log-odds `NONE` takes on an optional property's value menu where the model chooses
    # (`ArgumentValues.MODEL`): per model, from its calibration's `arguments.none_bias`; 0
    # (NONE as likely as the model says) where nothing says otherwise.
    none_bias: float = 0.0
    # A required value the request holds nothing for: asked of the user, or written by the
    # model (settings.py's `missing_values`).
    missing_values: MissingValues = field(
        default_factory=lambda: MissingValues(_setting("missing_values")))
    # Which optional properties the request supports: by its words, or also by meaning
    # (settings.py's `optional_values`).
    optional_values: OptionalValues = field(
        default_factory=lambda: OptionalValues(_setting("optional_values")))
    # Guided policy: the leaf evidence reads a request's shorthand of the catalog's words as
    # those words (settings.py's `shorthand`; server/embeddings/abbreviations.py).
    shorthand: bool = field(default_factory=lambda: _setting("shorthand"))

    @property
    def policy(self) -> Policy:
        return Policy.PLAIN if self.recovery is None else Policy.GUIDED

    def describe(self) -> dict[str, str | None]:
        """What a trace and `--json` record about how this run routed (`abstention` only
        where the check is on, `argument_values` only where not the model's choice (else
        `none_bias` where not 0),
        `missing_values` only where they are written rather than asked, `optional_values`
        only where by words alone, `shorthand` only where off)."""
        out: dict[str, str | None] = {
            "policy": self.policy.value, "calibration": self.calibration,
            "speculation": self.speculation.value,
            "unwinding": "on" if self.unwinding else "off"}
        if self.abstention is not None and self.recovery is not None:
            out["abstention"] = "on"
        if self.argument_values is not ArgumentValues.MODEL:
            out["argument_values"] = self.argument_values.value
        elif self.none_bias:
            out["none_bias"] = f"{self.none_bias:g}"
        if self.missing_values is not MissingValues.ASK:
            out["missing_values"] = self.missing_values.value
        if self.optional_values is not OptionalValues.MEANING:
            out["optional_values"] = self.optional_values.value
        if not self.shorthand:
            out["shorthand"] = "off"
        return out
