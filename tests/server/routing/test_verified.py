"""What speculative routing and unwinding share (`server/routing/verified.py`): which levels
of one pass are step-by-step's decisions, and the trusted margin per precision."""

from __future__ import annotations

from types import SimpleNamespace

from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import MenuResult
from stackroute.server.routing.speculator import Drafter, Speculator
from stackroute.server.routing.unwinding import Unwinder
from stackroute.server.routing.verified import kept_levels, min_margin_for


def result(choice: str, margin: float) -> MenuResult:
    return MenuResult(choice=choice, probabilities={choice: 1.0}, margin=margin, usage=Usage())


def test_levels_are_kept_while_the_expected_answers_come_and_the_margins_hold() -> None:
    levels = [result("a", 1.0), result("b", 1.0), result("x", 1.0), result("d", 1.0)]
    assert [r.choice for r in kept_levels(levels, "abcd", min_margin=0.1)] == ["a", "b", "x"]
    close = [result("a", 1.0), result("b", 0.05), result("c", 1.0)]
    assert [r.choice for r in kept_levels(close, "abc", min_margin=0.1)] == ["a"]


def test_a_bfloat16_engine_trusts_only_wider_margins() -> None:
    assert min_margin_for("float32") == 1e-3
    assert min_margin_for("bfloat16") == 0.5  # its logits move in steps of 0.125 here
    for dtype, margin in (("float32", 1e-3), ("bfloat16", 0.5)):
        engine = SimpleNamespace(info=SimpleNamespace(dtype=dtype))
        assert Speculator(engine, Drafter()).min_margin == margin  # type: ignore[arg-type]
        assert Unwinder(engine).min_margin == margin  # type: ignore[arg-type]
    engine = SimpleNamespace(info=SimpleNamespace(dtype="bfloat16"))
    assert Speculator(engine, Drafter(), min_margin=0.2).min_margin == 0.2  # type: ignore[arg-type]
