"""Which drafts a run verifies by default: the `speculation` setting, else (guided policy) the
model's calibration's `speculation.drafts`, else the route cache. Decisions never depend on
it (test_speculation.py, test_path_prefetch.py); only model calls and time do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stackroute.runtime.errors import InputError
from stackroute.server.routing.calibration import CALIBRATION_DIR, router_options, speculation_of
from stackroute.server.routing.calibration_file import CalibrationFile
from stackroute.server.routing.options import DraftSource, Policy
from stackroute.server.settings import ServerSettings

BODY: dict[str, Any] = {"model": "m", "options": {}, "measured": {}}


def calibration(tmp_path: Path, **sections: Any) -> Path:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({**BODY, **sections}), encoding="utf-8")
    return path


def test_the_calibration_chooses_the_drafts_under_the_guided_policy(tmp_path: Path) -> None:
    silent = calibration(tmp_path)
    assert router_options("m", calibration=silent).speculation is DraftSource.ROUTES
    path = calibration(tmp_path, speculation={"drafts": "both"})
    options = router_options("m", calibration=path)
    assert options.speculation is DraftSource.BOTH
    assert options.describe()["speculation"] == "both"
    # plain routing has no leaf evidence to draft from: the route cache, whatever the file says
    plain = router_options("m", calibration=path, policy=Policy.PLAIN)
    assert plain.speculation is DraftSource.ROUTES


def test_the_flag_and_the_setting_override_the_calibration(tmp_path: Path) -> None:
    path = calibration(tmp_path, speculation={"drafts": "both"})
    flagged = router_options("m", calibration=path, speculation=DraftSource.OFF)
    assert flagged.speculation is DraftSource.OFF
    settings = ServerSettings(speculation=DraftSource.ROUTES, calibration=path)
    assert settings.router_options("m").speculation is DraftSource.ROUTES
    assert ServerSettings(calibration=path).router_options("m").speculation is DraftSource.BOTH


def test_a_bad_drafts_value_names_what_was_expected(tmp_path: Path) -> None:
    path = calibration(tmp_path, speculation={"drafts": "always"})
    with pytest.raises(InputError, match=r"'speculation.drafts' must be one of off, evidence, "
                                         r"routes, both, got 'always'"):
        router_options("m", calibration=path)


def test_the_shipped_calibrations_say_what_was_measured() -> None:
    # both tiers: both (Seal-Tools dev, 30 requests: model calls p50 4 -> 2 for the 135M,
    # 6 -> 4 for the 1.5B, the same calls)
    files = {p.stem: CalibrationFile.read(p) for p in CALIBRATION_DIR.glob("*.json")}
    assert speculation_of(files["qwen2.5-coder-1.5b-instruct-q4_k_m"]) is DraftSource.BOTH
    assert speculation_of(files["SmolLM2-135M-Instruct.Q4_1"]) is DraftSource.BOTH
