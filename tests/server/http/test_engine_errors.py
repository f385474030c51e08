"""Engine failures as HTTP answers (tier c: a real `stackroute serve` on loopback whose engine
is a RemoteEngine pointing at a real upstream on loopback, or a test double).

An upstream that is gone, failing or too slow is a gateway problem (502, 503 with its
Retry-After when it says it is overloaded, 504 on a timeout); an upstream that lacks a feature
the remote engine needs is a 502 naming the feature; none of them is a 500.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from doubles import RecordingEngine
from live_server import serve, server_settings
from stackroute.server.engines.option_scoring import OptionBiasError
from stackroute.server.engines.remote_engine import (
    RemoteEngine,
    RemoteEngineError,
    RemoteFeatureError,
    RemoteOptions,
    RemoteRejectedError,
    RemoteTimeoutError,
    RemoteUnavailableError,
)
from stackroute.server.http.app import create_app
from stackroute.server.http.errors import engine_error_status
from upstream_kit import FAST_RETRY, OK, Answer, Script, completion, fake_server

QUESTION = [{"role": "user", "content": "Pick a or b."}]
CHOICE = {"messages": QUESTION, "structured_outputs": {"choice": ["a", "b"]}}


def chat(base_url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)


@contextmanager
def stackroute_over(upstream: str, tmp_path: Path,
                    options: RemoteOptions = FAST_RETRY) -> Iterator[str]:
    """Our server on loopback, its engine a RemoteEngine over `upstream`; yields its URL."""
    with RemoteEngine(base_url=upstream, options=options) as remote, \
            serve(create_app(server_settings(tmp_path), engine=remote)) as base_url:
        yield base_url


def error_of(response: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    assert error["request_id"] == response.headers["x-request-id"]
    assert "Traceback" not in response.text
    return error


def test_an_upstream_that_went_away_is_502(tmp_path: Path) -> None:
    with serve(fake_server(Script(OK))) as upstream:
        remote = RemoteEngine(base_url=upstream, options=FAST_RETRY)
    # the engine met its upstream; now the upstream is stopped and its port closed
    with remote, serve(create_app(server_settings(tmp_path), engine=remote)) as base_url:
        response = chat(base_url, CHOICE)
    assert response.status_code == 502, response.text
    error = error_of(response)
    assert error["code"] == "remote_unavailable"
    assert error["type"] == "server_error"
    assert "upstream model server" in error["message"]
    assert "ConnectError" in error["message"] and "4 attempt(s)" in error["message"]


def test_an_overloaded_upstream_is_503_with_its_retry_after(tmp_path: Path) -> None:
    busy = (503, {"error": {"message": "too many requests in flight"}}, {"Retry-After": "120"})
    with serve(fake_server(Script(busy))) as upstream, \
            stackroute_over(upstream, tmp_path) as base_url:
        response = chat(base_url, CHOICE)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "120"
    error = error_of(response)
    assert error["code"] == "remote_unavailable"
    assert "too many requests in flight" in error["message"]


@pytest.mark.parametrize(("answer", "status", "code", "words"), [
    ((502, {"error": {"message": "no healthy backend"}}, {}), 502, "remote_unavailable",
     "HTTP 502: no healthy backend"),
    ((500, {"error": {"message": "CUDA error"}}, {}), 502, "remote_rejected",
     "HTTP 500: CUDA error"),  # not retried: it would fail again
    ((401, {"error": {"message": "bad key"}}, {}), 502, "remote_rejected", "HTTP 401: bad key"),
    ((429, {"error": {"message": "slow down"}}, {}), 503, "remote_unavailable",
     "HTTP 429: slow down"),  # overloaded throughout, but it named no time: no Retry-After
])
def test_an_upstream_failing_after_retries_is_a_gateway_error(
        answer: Answer, status: int, code: str, words: str, tmp_path: Path) -> None:
    with serve(fake_server(Script(answer))) as upstream, \
            stackroute_over(upstream, tmp_path) as base_url:
        response = chat(base_url, CHOICE)
    assert response.status_code == status, response.text
    assert "retry-after" not in response.headers
    error = error_of(response)
    assert error["code"] == code and words in error["message"]


def test_an_upstream_too_slow_to_answer_is_504(tmp_path: Path) -> None:
    slow = Script(OK, delay_s=1.0)
    options = RemoteOptions(timeout_s=0.3, backoff_s=0.01, max_retries=3)
    with serve(fake_server(slow)) as upstream, \
            stackroute_over(upstream, tmp_path, options) as base_url:
        response = chat(base_url, CHOICE)
    assert response.status_code == 504, response.text
    error = error_of(response)
    assert error["code"] == "remote_timeout" and "0.3 s" in error["message"]
    assert len(slow.bodies) == 1  # a timeout is not retried: it would only wait again


@pytest.mark.parametrize(("answer", "body", "feature"), [
    (completion("I would pick a, because it fits."), CHOICE, "structured_outputs"),
    ({"choices": [{"message": {"content": "a"}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
     {"messages": QUESTION, "logprobs": True, "top_logprobs": 2}, "logprobs"),
    ("refusal", CHOICE, "structured_outputs"),
])
def test_an_upstream_lacking_a_feature_is_502_naming_it(answer: Any, body: dict[str, Any],
                                                        feature: str, tmp_path: Path) -> None:
    script = Script((400, {"error": {"message": "unsupported field(s): structured_outputs"}},
                     {})) if answer == "refusal" else Script((200, answer, {}))
    with serve(fake_server(script)) as upstream, \
            stackroute_over(upstream, tmp_path) as base_url:
        response = chat(base_url, body)
    assert response.status_code == 502, response.text
    error = error_of(response)
    assert error["code"] == "remote_feature_missing"
    assert feature in error["message"]


def test_an_option_bias_the_engine_cannot_apply_is_501(tmp_path: Path) -> None:
    refusal = OptionBiasError("option_bias needs every option's exact probability; this answer "
                              "showed 0.870 of the mass")
    engine = RecordingEngine(error=refusal)
    with serve(create_app(server_settings(tmp_path), engine=engine)) as base_url:
        response = chat(base_url, CHOICE)
    assert response.status_code == 501, response.text
    error = error_of(response)
    assert error["code"] == "option_bias_unsupported"
    assert "exact probability" in error["message"] and "0.870" in error["message"]


@pytest.mark.parametrize(("error", "status", "retry_after"), [
    (RemoteUnavailableError("refused"), 502, None),
    (RemoteUnavailableError("HTTP 504", last_status=504, retry_after_s=5), 502, None),
    (RemoteUnavailableError("HTTP 503", last_status=503, retry_after_s=0.2), 503, "1"),
    (RemoteUnavailableError("HTTP 429", last_status=429, retry_after_s=61.5), 503, "62"),
    (RemoteUnavailableError("no free connection", is_overloaded=True), 503, None),
    (RemoteTimeoutError("no answer within 120 s"), 504, None),
    (RemoteFeatureError("no logprobs"), 502, None),
    (RemoteRejectedError("HTTP 404", status=404), 502, None),
    (RemoteEngineError("finish_reason 'abort'"), 502, None),
])
def test_upstream_status_table(error: RemoteEngineError, status: int,
                               retry_after: str | None) -> None:
    got_status, message, headers = engine_error_status(error)
    assert (got_status, (headers or {}).get("Retry-After")) == (status, retry_after)
    assert message.startswith("the upstream model server") and message.endswith(str(error))
