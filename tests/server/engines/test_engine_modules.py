"""Tier (a): the engines' shared pieces, no model: their doctests, the error hierarchy and the
HTTP status every engine error carries."""

from __future__ import annotations

import doctest
import importlib

import pytest
from stackroute.runtime.errors import InputError, StackrouteError
from stackroute.server.engines.base import ContextOverflowError, EngineError
from stackroute.server.engines.option_scoring import OptionBiasError
from stackroute.server.engines.remote_engine import (
    RemoteEngineError,
    RemoteFeatureError,
    RemoteRejectedError,
    RemoteTimeoutError,
    RemoteUnavailableError,
)
from stackroute.server.engines.verification import PathLayoutError
from stackroute.server.engines.vllm_engine import VllmNotInstalledError, VllmRequestError


@pytest.mark.parametrize("name", ["base", "common", "tree_attention", "loop_thread",
                                  "remote_errors"])
def test_doctests(name: str) -> None:
    module = importlib.import_module(f"stackroute.server.engines.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(("error", "status", "is_input"), [
    (ContextOverflowError("prompt needs 9000 tokens"), 400, True),
    (VllmNotInstalledError("pip install vllm"), 400, True),
    (VllmRequestError("bad schema"), 400, True),
    (OptionBiasError("needs exact probabilities"), 501, False),
    (RemoteEngineError("finish_reason 'abort'"), 502, False),
    (RemoteFeatureError("no logprobs"), 502, False),
    (RemoteRejectedError("HTTP 404", status=404), 502, False),
    (RemoteUnavailableError("refused"), 502, False),
    (RemoteUnavailableError("HTTP 504", last_status=504, retry_after_s=5), 502, False),
    (RemoteUnavailableError("HTTP 503", last_status=503), 503, False),
    (RemoteUnavailableError("HTTP 429", last_status=429), 503, False),
    (RemoteUnavailableError("no free connection", is_overloaded=True), 503, False),
    (RemoteTimeoutError("no answer within 120 s"), 504, False),
    (PathLayoutError("level 1 does not extend level 0"), 500, False),
])
def test_every_engine_error_carries_its_http_status(error: EngineError, status: int,
                                                    is_input: bool) -> None:
    assert isinstance(error, EngineError) and isinstance(error, StackrouteError)
    assert error.http_status == status
    assert isinstance(error, InputError) is is_input


def test_a_path_that_is_not_append_only_is_still_a_value_error() -> None:
    # The speculator falls back to step-by-step routing on a ValueError.
    assert issubclass(PathLayoutError, ValueError)
