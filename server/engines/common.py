"""What every engine does the same way: the context check, the answer to a one-option menu, a
choice generation built from a menu decision, and thread-safe counters for `metrics()`.

One-option menus: nothing is decided, so no engine calls the model and every engine reports
the same usage, `Usage()` (no model call, no tokens, no passes): tokens no model saw are not
counted, and the remote engine could not count them without a request.

>>> single_option_result("BACK").usage.model_calls
0
>>> counters = Counters("menu_calls", "requests")
>>> counters.add(menu_calls=1)
>>> counters.snapshot()
{'menu_calls': 1.0, 'requests': 0.0}
"""

from __future__ import annotations

import math
import threading

from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    ContextOverflowError,
    Generation,
    MenuResult,
    TokenLogprob,
)

_MIN_PROBABILITY = 1e-300  # log of a probability that underflowed to 0 stays finite


def check_context(num_tokens: int, max_context_tokens: int) -> None:
    """ContextOverflowError when `num_tokens` do not fit the model's context."""
    if num_tokens > max_context_tokens:
        raise ContextOverflowError(
            f"prompt needs {num_tokens} tokens; the model's context holds {max_context_tokens}")


def single_option_result(option: str) -> MenuResult:
    """The answer to a menu of one option: that option, certain, at no cost."""
    return MenuResult(choice=option, probabilities={option: 1.0}, margin=math.inf,
                      usage=Usage())


def generation_from_choice(result: MenuResult) -> Generation:
    """A choice-constrained generation from a menu decision: the chosen option as the text,
    its log-probability, and every option's as the alternatives (most likely first)."""
    ranked = sorted(result.probabilities.items(), key=lambda kv: -kv[1])
    top = tuple((o, math.log(max(p, _MIN_PROBABILITY))) for o, p in ranked)
    entry = TokenLogprob(token=result.choice, top=top, logprob=math.log(
        max(result.probabilities[result.choice], _MIN_PROBABILITY)))
    return Generation(text=result.choice, finish_reason="stop", usage=result.usage,
                      logprobs=(entry,))


class Counters:
    """Named float counters for `Engine.metrics()`, safe to add to from many threads.
    Unknown names are our bug (a KeyError), so a typo cannot invent a metric."""

    def __init__(self, *names: str) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(names, 0.0)

    def add(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._values[name] += amount

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._values)
