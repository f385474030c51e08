"""The embedded engine's decoding options on the command line and in the settings: `--dtype`,
`--max-draft-tokens`, `--max-string-chars` (and `auto` precision's choice per CPU)."""

from __future__ import annotations

import pytest
from stackroute.runtime.errors import InputError
from stackroute.server.cli import app
from stackroute.server.commands.common import EngineFlags
from stackroute.server.engines.cpu_dtype import native_bf16, resolve_dtype
from stackroute.server.settings import ServerSettings, SettingsError
from typer.testing import CliRunner

SPR_FLAGS = "processor : 0\nflags : fpu sse2 avx512f avx512_bf16 amx_bf16 amx_tile\n"


def test_the_embedded_engine_gets_every_flag() -> None:
    options = EngineFlags(dtype="bfloat16", max_draft_tokens=0, max_string_chars=32)
    assert options.options_for("transformers") == {
        "dtype": "bfloat16", "max_draft_tokens": 0, "max_string_chars": 32}


def test_a_flag_another_engine_cannot_use_is_an_error_naming_it() -> None:
    assert EngineFlags().options_for("remote") == {}
    with pytest.raises(InputError, match=r"--dtype, --max-string-chars apply to the "
                                         r"transformers engine only; got --engine vllm"):
        EngineFlags(dtype="bfloat16", max_string_chars=8).options_for("vllm")


def test_the_cli_refuses_a_precision_for_a_remote_engine_before_loading_anything(
        tmp_path: object) -> None:
    result = CliRunner().invoke(app, ["route", "examples/bank.catalog.json", "Send 5 to Asha",
                                      "--engine", "remote", "--base-url",
                                      "http://127.0.0.1:9", "--dtype", "bfloat16"])
    assert result.exit_code == 2
    assert "--dtype apply to the transformers engine only" in result.output


def test_auto_precision_follows_the_cpu() -> None:
    assert native_bf16(SPR_FLAGS)
    assert not native_bf16("flags : fpu sse2 avx2 fma\n")
    assert not native_bf16("no flags line at all\n")
    assert resolve_dtype("auto") in ("bfloat16", "float32")
    with pytest.raises(InputError, match=r"dtype must be one of auto, float32, bfloat16, "
                                         r"float16; got 'fp8'"):
        resolve_dtype("fp8")


def test_the_settings_take_a_precision_and_refuse_an_unknown_one() -> None:
    assert ServerSettings(dtype="auto").dtype == "auto"
    with pytest.raises((SettingsError, ValueError), match="dtype"):
        ServerSettings(dtype="fp8")  # type: ignore[arg-type]


@pytest.mark.model
def test_auto_loads_the_precision_it_names() -> None:
    from stackroute.server.engines.model_store import load_model, resolve_model

    loaded = load_model(resolve_model(None), dtype="auto", num_threads=1)
    assert loaded.dtype == resolve_dtype("auto")
    assert str(loaded.model.dtype) == f"torch.{loaded.dtype}"


@pytest.mark.parametrize(("cores", "preset", "expected"),
                         [(2, None, "1"), (2, "2", "2"), (8, None, None)])
def test_the_cli_runs_one_torch_thread_on_two_cores_unless_the_operator_says_otherwise(
        monkeypatch: pytest.MonkeyPatch, cores: int, preset: str | None,
        expected: str | None) -> None:
    import os

    import stackroute.server.cli as cli

    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    if preset is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", preset)
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    seen = []
    monkeypatch.setattr(cli, "app", lambda: seen.append(os.environ.get("OMP_NUM_THREADS")))
    cli.main()
    assert seen == [expected]


def test_unwinding_is_a_setting_a_flag_and_part_of_the_routing_description() -> None:
    from stackroute.server.commands.common import RoutingFlags
    from stackroute.server.routing.calibration import router_options

    assert RoutingFlags.parse(policy="plain", calibration=None, unwinding=True).unwinding
    options = router_options("no-such-model", unwinding=True)
    assert options.unwinding and options.describe()["unwinding"] == "on"
    assert ServerSettings(unwinding=True).router_options("no-such-model").unwinding
    assert not ServerSettings().router_options("no-such-model").unwinding


def test_the_cli_module_runs_as_a_program() -> None:
    """`python -m stackroute.server.cli` is how the tests and the benchmarks start `serve`."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "stackroute.server.cli", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "serve" in done.stdout, done.stderr


# -- the other engines' flags: --chat-template, --engine-arg, --served-model-name,
#    --remote-constraints (registry.engine_options) ------------------------------------------
def test_each_engine_gets_the_flags_it_uses() -> None:
    from pathlib import Path

    flags = EngineFlags(chat_template=Path("t.jinja"),
                        engine_args=("tensor_parallel_size=2", "quantization=awq",
                                     'structured_outputs_config={"backend": "guidance"}'),
                        served_model_name="router")
    assert flags.engine_options_for("vllm") == {
        "chat_template": Path("t.jinja"), "served_model_name": "router",
        "engine_args": {"tensor_parallel_size": 2, "quantization": "awq",
                        "structured_outputs_config": {"backend": "guidance"}}}
    assert EngineFlags(chat_template=Path("t.jinja")).engine_options_for("transformers") == {
        "chat_template": Path("t.jinja")}
    assert EngineFlags().engine_options_for("remote") == {"constraints": "auto"}
    assert EngineFlags(remote_constraints="grammar").engine_options_for("remote") == {
        "constraints": "grammar"}
    assert EngineFlags(served_model_name="x").engine_options_for("pkg.mod:factory") == {}


@pytest.mark.parametrize(("flags", "engine", "words"), [
    (EngineFlags(engine_args=("max_model_len=9",)), "transformers",
     "--engine-arg is for the vllm engine; got --engine transformers"),
    (EngineFlags(served_model_name="x"), "remote", "--served-model-name is for the vllm"),
    (EngineFlags(chat_template=__import__("pathlib").Path("t")), "remote",
     "a remote upstream renders its own prompts"),
    (EngineFlags(remote_constraints="grammar"), "vllm", "--remote-constraints is for the "
                                                          "remote engine"),
    (EngineFlags(remote_constraints="guided"), "remote", "auto or one of structured_outputs"),
    (EngineFlags(engine_args=("max_model_len",)), "vllm", "KEY=VALUE"),
])
def test_a_flag_for_another_engine_is_an_error_naming_it(flags: EngineFlags, engine: str,
                                                         words: str) -> None:
    with pytest.raises(InputError, match=words):
        flags.engine_options_for(engine)


def test_the_cli_refuses_an_engine_arg_for_the_embedded_engine_before_loading() -> None:
    result = CliRunner().invoke(app, ["route", "examples/bank.catalog.json", "Send 5 to Asha",
                                      "--engine-arg", "max_model_len=4096"])
    assert result.exit_code == 2
    assert "--engine-arg is for the vllm engine" in result.output


def test_the_settings_take_the_engine_settings_and_check_them(tmp_path: object) -> None:
    from pathlib import Path

    from stackroute.server.http.app import build_engine

    folder = Path(str(tmp_path))
    config = folder / "settings.json"
    config.write_text('{"engine_args": {"max-model-len": 9}, "served_model_name": "r", '
                      '"chat_template": "t.jinja"}')
    settings = ServerSettings(config=config, db=str(folder / "s.db"), engine="vllm")
    assert settings.engine_args == {"max-model-len": 9}
    assert settings.chat_template == folder / "t.jinja"  # relative to the config file
    with pytest.raises(SettingsError, match="--engine-arg is for the vllm engine; "
                                            "--served-model-name is for the vllm engine; got "
                                            "--engine transformers"):
        ServerSettings.load(config=config, db=str(folder / "s.db"))
    with pytest.raises((SettingsError, ValueError), match="remote_constraints"):
        ServerSettings(remote_constraints="guided_choice")
    with pytest.raises((SettingsError, ValueError), match="--remote-constraints is for the "
                                                          "remote engine; got --engine vllm"):
        ServerSettings(engine="vllm", remote_constraints="json_schema")
    embedded = ServerSettings(db=str(folder / "s.db"), chat_template=folder / "t.jinja")
    with pytest.raises(InputError, match="cannot read chat template"):
        build_engine(embedded)  # read before any model loads


@pytest.mark.model
def test_the_embedded_engine_renders_through_a_chat_template_file(embedded_model: object,
                                                                  ) -> None:
    from pathlib import Path

    from stackroute.runtime.messages import Message
    from stackroute.runtime.prompt import Prompt
    from stackroute.server.engines.transformers_engine import TransformersEngine

    gemma = Path(__file__).parent / "chat_templates" / "gemma" / "tokenizer_config.json"
    engine = TransformersEngine(loaded=embedded_model,  # type: ignore[arg-type]
                                chat_template=gemma)
    assert dict(engine.info.features) == {"prompt_rendering": "template"}
    prompt = Prompt((Message("system", "Route it."), Message("user", "Pay my bill. Options: "
                                                                     "payments, DONE")))
    # Gemma's turns (plain text to SmolLM2's tokenizer), opened by the model's own bos token
    assert engine.renderer.decode(engine.renderer.prompt_ids(prompt)).startswith(
        "<|im_start|><start_of_turn>user\nRoute it.\n\nPay my bill.")
    assert engine.choose(prompt, ("payments", "DONE")).choice in ("payments", "DONE")
    default = TransformersEngine(loaded=embedded_model)  # type: ignore[arg-type]
    assert dict(default.info.features) == {"prompt_rendering": "chatml"}
