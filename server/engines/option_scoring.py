"""Option probabilities from what a constrained answer's token logprobs show, for engines that
see no logits: the remote engine (over HTTP) and the vLLM engine's constrained menu mode.

A server that decodes under a choice constraint reports, for each generated token, its top-k
alternatives with log-probabilities taken **after** the grammar mask and renormalised over the
tokens the mask allows (vLLM in every `logprobs_mode`). Those numbers define one distribution
exactly: the constrained sampler's, "the chance that sampling under the constraint at
temperature 1 answers option o" (the sum over every token path that spells o). It is not the
model's unconstrained preference, and not the canonical-tokenisation distribution the
transformers engine computes: the mask admits non-canonical splits (`s|ear|ch` competes with
`search`), which take their own share of the mass.

What one answer shows of that distribution: along the chosen path, each alternative token is
a branch whose mass is known. `estimate_options` adds every branch that leads to a single
option to that option. It is **exact** when every branch is resolved: each step's top-k covers
all the tokens the mask allows (so their masses sum to one) and no branch off the chosen path
is shared by several options. A server that answers a menu with whole options as single
"tokens" (our own `stackroute serve`, up to 20 options) is always exact. Otherwise it is an
estimate: a branch shared by several options is split evenly between them, and mass the top-k
did not show goes evenly to the options that got none (they must be somewhere in it).

>>> steps = [TokenStep(b"s", -1.125, ((b"s", -1.125), (b"search", -1.25), (b"c", -2.0),
...                                    (b"a", -2.0), (b"cre", -3.375)))]
>>> est = estimate_options(["search_web", "create_ticket", "ask_user"], "search_web", steps)
>>> round(est.probabilities["search_web"], 3), est.is_exact
(0.667, False)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stackroute.runtime.errors import InputError
from stackroute.server.engines.base import EngineError

NEAR_TIE_MARGIN = 0.1  # nats: options this close can flip with bf16, batch shape or cache state
MASKED_LOGPROB = -9000.0  # servers report a masked-out top-k slot as -9999 (JSON has no -inf)
_EXACT_TOLERANCE = 1e-4  # top-k masses that sum to within this of one cover every allowed token


class InvalidMenuError(InputError, ValueError):
    """A menu no engine can answer: empty, duplicated, or with an empty or space-led name.
    (A ValueError too, as the transformers engine's menu compiler raises.)"""

    code = "invalid_menu"


class OptionBiasError(EngineError):
    """`option_bias` asked of an engine that cannot apply it exactly for this menu: a 501,
    since the server's own routing asked for it (no request field carries a bias)."""

    code = "option_bias_unsupported"
    http_status = 501


def check_menu(options: Sequence[str]) -> tuple[str, ...]:
    """The options as a tuple, or InvalidMenuError naming what is wrong (vLLM rejects an
    empty choice list only when the request runs, and once crashed on one).

    >>> check_menu(["a", "b"])
    ('a', 'b')
    >>> check_menu(["a", "a"])  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InvalidMenuError: menu options must be unique; duplicated: ['a']
    """
    if isinstance(options, str):
        raise InvalidMenuError(f"a menu is a sequence of option names, not the string "
                               f"{options!r}")
    menu = tuple(options)
    if not menu:
        raise InvalidMenuError("a menu needs at least one option; got none")
    if len(set(menu)) != len(menu):
        duplicated = sorted({o for o in menu if menu.count(o) > 1})
        raise InvalidMenuError(f"menu options must be unique; duplicated: {duplicated}")
    for name in menu:
        if not isinstance(name, str) or not name or name[0].isspace():
            raise InvalidMenuError(f"menu option {name!r} is empty or starts with whitespace")
    return menu


@dataclass(frozen=True)
class TokenStep:
    """One generated token (`token`, its bytes) and its top-k alternatives, the chosen one
    among them, as `(bytes, logprob)`."""

    token: bytes
    logprob: float
    alternatives: tuple[tuple[bytes, float], ...] = ()


@dataclass(frozen=True, kw_only=True)
class OptionEstimate:
    """Every option's probability under the constrained sampler (they sum to one), and how
    much of it the answer showed: `resolved_mass` is the mass attributed to single options
    from observed branches (1.0 and `is_exact` when nothing was split or guessed)."""

    probabilities: dict[str, float]
    resolved_mass: float
    is_exact: bool


def estimate_options(options: Sequence[str], answer: str,
                     steps: Sequence[TokenStep]) -> OptionEstimate:
    """Option probabilities from a constrained answer's per-token top-k (see the module)."""
    encoded = {o: o.encode() for o in options}
    if answer not in encoded:
        raise ValueError(f"answer {answer!r} is not one of the options")
    target = encoded[answer]
    resolved = dict.fromkeys(options, 0.0)
    whole = _whole_options(encoded, target, steps)
    if whole is not None:
        for name, mass in whole.items():
            resolved[name] += mass
        return _complete(options, resolved, ())
    shared: list[tuple[tuple[str, ...], float]] = []
    prefix, log_mass, is_ended = b"", 0.0, False
    for step in steps:
        is_end_step = prefix == target and (not step.token
                                            or not _extends(encoded, prefix + step.token))
        skipped_chosen = False
        for token, logprob in step.alternatives:
            if not skipped_chosen and token == step.token:
                skipped_chosen = True
                continue
            if logprob <= MASKED_LOGPROB or not math.isfinite(logprob):
                continue
            owners = _owners(encoded, prefix, token)
            mass = math.exp(log_mass + logprob)
            if len(owners) == 1:
                resolved[owners[0]] += mass
            elif owners:
                shared.append((owners, mass))
        log_mass += step.logprob
        if is_end_step:
            is_ended = True
            break
        prefix += step.token
    final = math.exp(log_mass)
    longer = tuple(o for o, b in encoded.items() if b != target and b.startswith(target))
    if longer and not is_ended:  # the end step was not reported: "answer" or a longer option
        shared.append(((answer, *longer), final))
    else:
        resolved[answer] += final
    return _complete(options, resolved, shared)


def _whole_options(encoded: Mapping[str, bytes], target: bytes,
                   steps: Sequence[TokenStep]) -> dict[str, float] | None:
    """Masses by option when the server answered with whole options as single entries (one
    step spelling the answer, every alternative an option: `stackroute serve` does this), else
    None. A token server whose answer is one token and whose alternatives all happen to be
    whole options reads the same way, which is exact unless one of them is a prefix of a
    longer option and the end-of-turn step went unreported."""
    if len(steps) != 1 or steps[0].token != target:
        return None
    names = {b: o for o, b in encoded.items()}
    shown = [(t, lp) for t, lp in steps[0].alternatives
             if lp > MASKED_LOGPROB and math.isfinite(lp)]
    if not all(t in names for t, _ in shown):
        return None
    masses = {names[t]: math.exp(lp) for t, lp in shown}
    masses.setdefault(names[target], math.exp(steps[0].logprob))
    return masses


def _extends(encoded: Mapping[str, bytes], text: bytes) -> bool:
    return any(b.startswith(text) for b in encoded.values())


def _owners(encoded: Mapping[str, bytes], prefix: bytes, token: bytes) -> tuple[str, ...]:
    """The options a branch `prefix + token` can still become. A token that extends no option
    (the end-of-turn token, often reported as "") ends the option `prefix` spells, if any."""
    if token:
        text = prefix + token
        owners = tuple(o for o, b in encoded.items() if b.startswith(text))
        if owners:
            return owners
    return tuple(o for o, b in encoded.items() if b == prefix)


def _complete(options: Sequence[str], resolved: dict[str, float],
              shared: Sequence[tuple[tuple[str, ...], float]]) -> OptionEstimate:
    resolved_mass = sum(resolved.values())
    probabilities = dict(resolved)
    for owners, mass in shared:
        for o in owners:
            probabilities[o] += mass / len(owners)
    shown = sum(probabilities.values())
    missing = max(0.0, 1.0 - shown)
    unseen = [o for o in options if probabilities[o] == 0.0]
    if missing > _EXACT_TOLERANCE and unseen:
        for o in unseen:
            probabilities[o] = missing / len(unseen)
    total = sum(probabilities.values())
    probabilities = {o: p / total for o, p in probabilities.items()}
    is_exact = not shared and abs(1.0 - resolved_mass) <= _EXACT_TOLERANCE
    return OptionEstimate(probabilities=probabilities, resolved_mass=min(1.0, resolved_mass),
                          is_exact=is_exact)


def tilt(probabilities: Mapping[str, float], bias: Mapping[str, float]) -> dict[str, float]:
    """`p(o) * exp(bias(o))`, renormalised: `option_bias` applied to a known distribution
    (what the transformers engine returns when every option has its own first token).

    >>> {o: round(p, 3) for o, p in tilt({"a": 0.5, "b": 0.5}, {"a": math.log(3)}).items()}
    {'a': 0.75, 'b': 0.25}
    """
    unknown = sorted(set(bias) - set(probabilities))
    if unknown:
        raise ValueError(f"option_bias names options not on the menu: {unknown}")
    logs = {}
    for o, p in probabilities.items():
        b = bias.get(o, 0.0)
        if not math.isfinite(b):
            raise ValueError(f"option_bias for {o!r} is {b}; biases must be finite")
        logs[o] = (math.log(p) if p > 0 else -math.inf) + b
    top = max(logs.values())
    weights = {o: math.exp(v - top) for o, v in logs.items()}
    total = sum(weights.values())
    return {o: w / total for o, w in weights.items()}


def margin_of(probabilities: Mapping[str, float], choice: str) -> float:
    """Log-probability gap between `choice` and the best other option (`inf` with one
    option). Negative when the choice is not the most probable option."""
    others = [p for o, p in probabilities.items() if o != choice]
    if not others:
        return math.inf
    best_other = max(others)
    if best_other <= 0.0:
        return math.inf
    chosen = probabilities[choice]
    return (math.log(chosen) if chosen > 0 else -math.inf) - math.log(best_other)


def max_answer_tokens(options: Sequence[str]) -> int:
    """A `max_tokens` no option can run out of: a constrained decoder may spell an option in
    single bytes (non-canonical paths), then needs one more token to stop."""
    return max(len(o.encode()) for o in options) + 1


@dataclass(frozen=True, kw_only=True)
class AnswerDecision:
    """A menu decision read from a constrained answer (see `decide_from_answer`)."""

    choice: str
    probabilities: dict[str, float]
    margin: float
    is_exact: bool


def decide_from_answer(options: Sequence[str], answer: str, steps: Sequence[TokenStep], *,
                       option_bias: Mapping[str, float] | None = None) -> AnswerDecision:
    """The decision a constrained answer gives. Without a bias it is the server's answer, with
    the estimated probabilities. With one, the probabilities are tilted on this side and the
    choice is their argmax (the server's answer wins ties), which needs the exact
    distribution: an estimate raises OptionBiasError rather than tilt guesses."""
    estimate = estimate_options(options, answer, steps)
    probabilities, choice = estimate.probabilities, answer
    if option_bias and any(option_bias.values()):
        if not estimate.is_exact:
            raise OptionBiasError(
                "option_bias needs every option's exact probability; this answer showed "
                f"{estimate.resolved_mass:.3f} of the mass (options that share prefixes, or "
                "more allowed tokens than top_logprobs)")
        probabilities = tilt(probabilities, option_bias)
        if probabilities[choice] < max(probabilities.values()):
            choice = max(options, key=lambda o: probabilities[o])
    return AnswerDecision(choice=choice, probabilities=probabilities,
                          margin=margin_of(probabilities, choice), is_exact=estimate.is_exact)
