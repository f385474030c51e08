"""A calibration file is read once per router: every section (recovery options, argument
values, the abstention check) comes from that one read, and a file that is not a JSON object
is a clear error naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stackroute.runtime.errors import InputError
from stackroute.server.routing.calibration import router_options
from stackroute.server.routing.calibration_file import CalibrationFile
from stackroute.server.routing.options import ArgumentValues


def test_router_options_read_the_calibration_once(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({
        "model": "m", "options": {}, "measured": {}, "arguments": {"values": "priors"},
        "abstention": {"options": {"score_weight": 1.0, "threshold": 0.2},
                       "is_default": True}}), encoding="utf-8")
    reads: list[Path] = []
    real = CalibrationFile.read.__func__  # type: ignore[attr-defined]

    def counted(cls: type[CalibrationFile], p: Path) -> CalibrationFile:
        reads.append(p)
        return real(cls, p)

    monkeypatch.setattr(CalibrationFile, "read", classmethod(counted))
    options = router_options("m", calibration=path)
    assert reads == [path]
    assert options.argument_values is ArgumentValues.PRIORS
    assert options.abstention is not None and options.abstention.threshold == 0.2
    assert options.calibration == "m.json"


@pytest.mark.parametrize("text, expected", [
    ("[1, 2]", "expected a calibration file (a JSON object), got list"),
    ("{not json", "expected a calibration file (JSON)"),
])
def test_a_file_that_is_not_a_json_object_is_named_in_the_error(
        tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.json") as e:
        router_options("m", calibration=path)
    assert expected in str(e.value)


def test_recalibrating_routing_keeps_the_files_other_sections(tmp_path: Path) -> None:
    """`calibrate` without `--abstention` rewrites the routing options of the file it writes;
    a check or argument-values choice fitted earlier into the same file for the same model
    stays (it was silently dropped before), one fitted for another model does not."""
    from stackroute.server.routing.calibration import write_calibration
    from stackroute.server.routing.recovery import RecoveryOptions

    path = tmp_path / "m.json"
    check = {"options": {"score_weight": 1.0, "threshold": 0.2}, "is_default": False}
    path.write_text(json.dumps({"model": "m", "options": {}, "measured": {"old": 1},
                                "arguments": {"values": "priors"}, "abstention": check}),
                    encoding="utf-8")
    write_calibration(path, model="m", options=RecoveryOptions(evidence_weight=0.4),
                      measured={"new": 2})
    body = json.loads(path.read_text(encoding="utf-8"))
    assert body["options"]["evidence_weight"] == 0.4 and body["measured"] == {"new": 2}
    assert body["abstention"] == check and body["arguments"] == {"values": "priors"}
    write_calibration(path, model="other", options=RecoveryOptions(), measured={})
    assert set(json.loads(path.read_text(encoding="utf-8"))) == {"model", "options", "measured"}
