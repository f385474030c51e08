"""The robustness benchmark's pieces that need no model: its rows and its goal verdict."""

from __future__ import annotations

from typing import Any

from stackroute.bench.environment import engine_environment, git_state
from stackroute.bench.experiments.robust import goal_check, variants
from stackroute.server.routing.recovery import RecoveryOptions


def test_rows_add_one_mechanism_each() -> None:
    calibrated = RecoveryOptions(evidence_weight=0.5, contrast_strength=0.8,
                                 backtrack_gap=0.06, fallback_min_score=0.29)
    rows = {v.name: v for v in variants(calibrated, beam_width=3)}
    assert list(rows) == ["flat", "hierarchical", "+evidence", "+calibrated",
                          "+backtracking", "+beam", "+fallback"]
    assert rows["flat"].is_flat and rows["hierarchical"].recovery is None
    evidence, contrast = rows["+evidence"].recovery, rows["+calibrated"].recovery
    backtracking, beam = rows["+backtracking"].recovery, rows["+beam"].recovery
    fallback = rows["+fallback"].recovery
    assert evidence is not None and evidence.evidence_weight == 0.5
    assert not (evidence.is_contrast_enabled or evidence.is_backtracking_enabled
                or evidence.is_fallback_enabled or evidence.beam_width > 1)
    assert contrast is not None and contrast.is_contrast_enabled
    assert contrast.contrast_strength == 0.8 and not contrast.is_backtracking_enabled
    assert backtracking is not None and backtracking.is_backtracking_enabled
    assert backtracking.backtrack_gap == 0.06 and backtracking.beam_width == 1
    assert beam is not None and beam.beam_width == 3 and not beam.is_fallback_enabled
    assert fallback is not None and fallback.is_fallback_enabled
    assert fallback.fallback_min_score == 0.29


def _row(success: float, tokens: float) -> dict[str, Any]:
    return {"success": success, "prompt_tokens_mean": tokens}


def test_goal_check_compares_success_and_token_share() -> None:
    results = {
        "semantic-overlap-16": {"variants": {"flat": _row(0.5, 4000), "+fallback": _row(0.9, 700)},
                                "flat_prompt_tokens_needed_mean": 4000},
        "semantic-overlap-64": {"variants": {"flat": _row(0.0, 0), "+fallback": _row(0.8, 900)},
                                "flat_prompt_tokens_needed_mean": 15000},
        "semantic-overlap-32": {"variants": {"flat": _row(1.0, 8000), "+fallback": _row(0.9, 900)},
                                "flat_prompt_tokens_needed_mean": 8000},
        "seal-tools-dev": {"variants": {}},
    }
    lines = goal_check(results)
    assert len(lines) == 3
    assert lines[0].endswith("meets") and "17.5%" in lines[0]
    assert lines[1].endswith("meets") and "6.0%" in lines[1]  # flat overflowed: tokens needed
    assert lines[2].endswith("misses")


def test_environment_records_the_commit_it_was_given() -> None:
    """The commit is read when the run starts (another commit may land during a long run)."""
    class Info:
        model, engine, dtype = "m", "transformers", "float32"

    class StubEngine:
        info = Info()

    env = engine_environment(StubEngine(), git={"commit": "abc123", "num_changed_paths": 0})
    assert env["commit"] == "abc123" and env["model"] == "m"
    assert len(git_state()["commit"] or "") in (0, 40)
