"""The remote engine detects what its upstream offers for menus and uses the best (tier c):
upstreams are real `stackroute serve` apps on loopback over the session's embedded model;
llama.cpp's server where a build is installed. `/readyz` says which was chosen."""

from __future__ import annotations

import math
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import serve, server_settings
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.server.engines.base import Constraint, SamplingOptions
from stackroute.server.engines.registry import create_engine
from stackroute.server.engines.remote_engine import (
    RemoteEngine,
    RemoteFeatureError,
    RemoteOptions,
)
from stackroute.server.engines.remote_features import (
    ConstraintApi,
    UpstreamFeatures,
    parse_constraint_api,
)
from stackroute.server.http.app import create_app
from upstream_kit import FAST_RETRY, UNAVAILABLE, Script, fake_server

SYSTEM = Message("system", "You route requests to tools. Answer with one option name.")
OPTIONS = ("weather", "calendar", "email", "DONE")


def menu_prompt(request: str) -> Prompt:
    return Prompt((SYSTEM, Message("user", f"Request: {request}\nOptions: "
                                           f"{', '.join(OPTIONS)}\nAnswer with one option.")))


@pytest.fixture(scope="module")
def live(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(create_app(server_settings(tmp_path_factory.mktemp("up")),
                          engine=engine)) as base_url:
        yield base_url


def detected(base_url: str, ladder: tuple[ConstraintApi, ...]) -> UpstreamFeatures:
    """What a probe of `ladder` finds at `base_url` (no retries)."""
    with RemoteEngine(base_url=base_url, options=RemoteOptions(max_retries=0)) as remote:
        return remote.detect_features(ladder)


@pytest.mark.model
def test_a_stackroute_upstream_is_probed_to_structured_outputs_and_readyz_says_so(
        live: str, tmp_path: Path) -> None:
    remote = create_engine("remote", base_url=live)
    assert isinstance(remote, RemoteEngine)
    assert remote.features == UpstreamFeatures(
        constraints=ConstraintApi.STRUCTURED_OUTPUTS, has_logprobs=True, is_probed=True)
    with serve(create_app(server_settings(tmp_path), engine=remote)) as front:
        ready = httpx.get(f"{front}/readyz", timeout=30).json()
    assert ready["engine"]["engine"] == "remote"
    assert ready["engine"]["constraints"] == "structured_outputs"
    assert ready["engine"]["logprobs"] == "yes"
    assert ready["engine"]["constraints_source"] == "probed"
    remote.close()


@pytest.mark.model
def test_menus_by_a_json_schema_enum_read_the_answer_without_quotes(live: str,
                                                                    engine: Any) -> None:
    with RemoteEngine(base_url=live, constraints="json_schema") as remote:
        for request in ("Will it rain in Oslo tomorrow?", "Email Ana the report."):
            prompt = menu_prompt(request)
            result = remote.choose(prompt, OPTIONS)
            assert result.choice in OPTIONS  # the bare name, not '"weather"'
            assert math.isclose(sum(result.probabilities.values()), 1.0, rel_tol=1e-9)
            assert result.probabilities[result.choice] == max(result.probabilities.values())
            gen = remote.generate(prompt, constraint=Constraint.choice(OPTIONS))
            assert gen.text == result.choice
            pieces: list[str] = []
            streamed = remote.generate_stream(
                prompt, on_delta=lambda d, out=pieces: out.append(d.text),
                constraint=Constraint.choice(OPTIONS))
            assert "".join(pieces) == streamed.text == result.choice
        assert remote.info.features[0] == ("constraints", "json_schema")
        with pytest.raises(RemoteFeatureError, match="no regex constraint"):
            remote.generate(menu_prompt("x"), constraint=Constraint.regex("[0-9]+"),
                            sampling=SamplingOptions(max_tokens=3))


@pytest.mark.model
def test_a_rung_the_upstream_refuses_or_ignores_moves_down_the_ladder(
        live: str, engine: Any, tmp_path: Path) -> None:
    """`grammar` is llama.cpp's field, not ours: a strict stackroute refuses it (400), a
    lenient one may ignore it and answer free text; either way the probe moves on."""
    found = detected(live, (ConstraintApi.GRAMMAR, ConstraintApi.JSON_SCHEMA))
    assert found.constraints is ConstraintApi.JSON_SCHEMA and found.is_probed
    (note,) = found.notes
    assert note.startswith("grammar: ") and ("refused" in note or "ignored" in note)
    strict = server_settings(tmp_path, strict_openai=True)
    with serve(create_app(strict, engine=engine)) as url:
        nothing = detected(url, (ConstraintApi.GRAMMAR,))
    assert nothing.constraints is ConstraintApi.NONE and not nothing.has_logprobs
    assert "refused" in nothing.notes[0] and "400" in nothing.notes[0]
    with RemoteEngine(base_url=live, constraints="none") as remote, \
            pytest.raises(RemoteFeatureError, match="honours no constraint"):
        remote.choose(menu_prompt("Email Ana."), OPTIONS)


def test_an_upstream_down_during_the_probe_keeps_the_assumed_api_and_starts() -> None:
    """A 503 is no verdict on any rung: the engine starts with what it assumed."""
    with serve(fake_server(Script(UNAVAILABLE))) as url, \
            RemoteEngine(base_url=url, options=FAST_RETRY, constraints="auto") as remote:
        assert remote.features.constraints is ConstraintApi.STRUCTURED_OUTPUTS
        assert not remote.features.is_probed and "no verdict" in remote.features.notes[0]
        assert ("constraints_source", "assumed") in remote.info.features


def test_constraint_api_names() -> None:
    assert parse_constraint_api("auto") is None
    assert parse_constraint_api("grammar") is ConstraintApi.GRAMMAR
    with pytest.raises(ValueError, match="auto or one of structured_outputs, json_schema"):
        parse_constraint_api("guided_choice")


@pytest.mark.parametrize("name", ["stackroute.server.engines.remote_features",
                                  "stackroute.server.engines.engine_args",
                                  "stackroute.server.engines.registry"])
def test_doctests(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


# -- llama.cpp's server, where a build is installed -------------------------------------------
@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("llama-server")
    if binary is None:
        pytest.skip("llama.cpp's llama-server is not installed here (no build on PATH)")
    from stackroute.server.engines.model_store import find_default_gguf

    port = 18000 + int(time.time()) % 1000
    process = subprocess.Popen([binary, "-m", str(find_default_gguf()), "--host", "127.0.0.1",
                                "--port", str(port), "-c", "2048"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            pytest.fail("llama-server did not come up in 120 s")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_llama_cpp_server_is_probed_below_structured_outputs(llama_server: str) -> None:
    with RemoteEngine(base_url=llama_server, constraints="auto") as remote:
        assert remote.features.constraints in (ConstraintApi.JSON_SCHEMA, ConstraintApi.GRAMMAR)
        result = remote.choose(menu_prompt("Will it rain in Oslo tomorrow?"), OPTIONS)
        assert result.choice in OPTIONS
