"""The conftest rule (tests/model_mark.py): a test that uses the real embedded model without
`@pytest.mark.model` fails before the model loads, whether it asks for the fixture itself or
through a fixture of its own; a marked test, or one whose `engine` is its own double, runs.

pytest runs here on a file of its own under the real tests/conftest.py, with `--setup-plan`
(the fixtures are planned, not run: no model loads)."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

TESTS = '''
import pytest


@pytest.fixture
def router(embedded_model_dir):
    return embedded_model_dir


def test_asks_for_the_engine_unmarked(engine):
    pass


def test_reaches_the_model_through_its_own_fixture(router):
    pass


@pytest.mark.model
def test_marked(engine):
    pass


def test_without_the_model():
    pass
'''

OWN_ENGINE = '''
import pytest


@pytest.fixture
def engine():
    return "a scripted double"


def test_own_double(engine):
    pass
'''

MODULE_MARK = '''
import pytest

pytestmark = pytest.mark.model


def test_marked_by_its_module(embedded_model):
    pass
'''


def run(pytester: pytest.Pytester, **files: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makeini("[pytest]\nmarkers =\n    model: needs the embedded model\n")
    pytester.makepyfile(**files)
    return pytester.runpytest("--setup-plan", "-p", "no:cacheprovider")


def test_an_unmarked_test_using_the_real_model_fails_with_the_reason(
        pytester: pytest.Pytester) -> None:
    result = run(pytester, test_rule=TESTS)
    result.assert_outcomes(errors=2)  # a planned test that passes setup counts as none
    result.stdout.fnmatch_lines([
        "*test_rule.py::test_marked (fixtures used: embedded_model, embedded_model_dir, engine*",
        "*test_rule.py::test_without_the_model",
        "*test_asks_for_the_engine_unmarked uses the real embedded model (fixture "
        "embedded_model, embedded_model_dir, engine) without @pytest.mark.model: mark it*",
        "*test_reaches_the_model_through_its_own_fixture uses the real embedded model (fixture "
        "embedded_model_dir) without @pytest.mark.model*",
    ])
    assert "test_marked uses" not in result.stdout.str()


def test_a_double_named_engine_and_a_module_mark_pass(pytester: pytest.Pytester) -> None:
    result = run(pytester, test_own_engine=OWN_ENGINE, test_module_mark=MODULE_MARK)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes()
    result.stdout.fnmatch_lines([
        "*test_module_mark.py::test_marked_by_its_module (fixtures used: embedded_model*",
        "*test_own_engine.py::test_own_double (fixtures used: engine)",
    ])
    assert "uses the real embedded model" not in result.stdout.str()
