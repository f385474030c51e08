"""Leaf evidence (tier a): the index and its disk cache, subtree scores, the prior over a menu,
and per-model calibration files. A bag-of-words embedder stands in for the real one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from doubles import WordEmbedder
from recovery_kit import house_tree
from stackroute.runtime.errors import InputError
from stackroute.runtime.menu import CompletionState, Menu
from stackroute.runtime.tree import Node
from stackroute.server.embeddings.leaf_index import (
    Aggregate,
    Evidence,
    EvidenceSource,
    LeafIndex,
    leaf_text,
)
from stackroute.server.routing.calibration import (
    calibration_file,
    load_recovery_options,
    read_calibration,
    write_calibration,
)
from stackroute.server.routing.prior import PriorOptions, menu_prior
from stackroute.server.routing.recovery import RecoveryOptions

# house_tree leaves in depth-first order
PATHS = ("billing/pay_water", "billing/pay_power", "transfers/split_rent",
         "transfers/send_gift", "transfers/abroad/wire_abroad", "weather")


@pytest.mark.parametrize(("name", "description", "text"), [
    ("getWaterQuality", "Water quality.", "get water quality: Water quality."),
    ("pay_water_bill", "Pay  it\nnow.", "pay water bill: Pay it now."),
    ("HTTPGet", "", "http get"),  # an acronym is a word of its own
    ("send-SMS.v2", "x", "send sms v 2: x"),  # letters and digits apart, as split_name does
])
def test_leaf_text(name: str, description: str, text: str) -> None:
    assert leaf_text(Node(name, (name,), description)) == text


def index(cache_dir: Path | None = None, embedder: WordEmbedder | None = None) -> LeafIndex:
    return LeafIndex.from_tree(house_tree(), embedder or WordEmbedder(), model_id="words",
                               cache_dir=cache_dir)


def evidence_with(scores: list[float]) -> Evidence:
    return Evidence(index=index(), scores=np.array(scores, dtype=np.float32))


def test_index_keeps_leaves_depth_first_with_subtree_spans() -> None:
    idx = index()
    assert idx.paths == PATHS and idx.report_paths == PATHS
    assert idx.spans[""] == (0, 6) and idx.spans["billing"] == (0, 2)
    assert idx.spans["transfers"] == (2, 5) and idx.spans["transfers/abroad"] == (4, 5)
    assert idx.spans["weather"] == (5, 6)
    assert np.allclose(np.linalg.norm(idx.vectors, axis=1), 1.0)


def test_subtree_scores() -> None:
    ev = evidence_with([0.8, 0.5, 0.2, 0.1, 0.4, 0.0])
    assert ev.node_score("billing") == pytest.approx(0.8)
    assert ev.node_score("transfers") == pytest.approx(0.4)
    assert ev.node_score("weather") == pytest.approx(0.0)
    soft = ev.node_score("billing", aggregate=Aggregate.SOFTMAX, temperature=0.1)
    assert soft == pytest.approx(0.1 * math.log(math.exp(8) + math.exp(5)), rel=1e-5)
    sharp = ev.node_score("billing", aggregate=Aggregate.SOFTMAX, temperature=1e-3)
    assert sharp == pytest.approx(0.8, abs=1e-3)  # a cold softmax is the max
    assert ev.outside_score("billing") == pytest.approx(0.4)
    assert ev.outside_score("") == -math.inf
    assert ev.best() == ("billing/pay_water", pytest.approx(0.8))
    assert ev.best("transfers")[0] == "transfers/abroad/wire_abroad"
    assert [p for p, _ in ev.top(3)] == ["billing/pay_water", "billing/pay_power",
                                         "transfers/abroad/wire_abroad"]
    without = ev.without(["billing/pay_water"])
    assert without.node_score("billing") == pytest.approx(0.5)
    assert without.top(9)[-1][0] == "weather" and len(without.top(9)) == 5
    assert ev.without([]) is ev
    with pytest.raises(KeyError, match="nope"):
        ev.node_score("nope")


def test_words_rank_the_right_leaf() -> None:
    embedder = WordEmbedder()
    source = EvidenceSource(index(embedder=embedder), embedder)
    assert source.for_request("pay the water bill").best()[0] == "billing/pay_water"
    assert source.for_request("wire money abroad").best()[0] == "transfers/abroad/wire_abroad"
    before = embedder.num_texts
    source.for_request("pay the water bill")
    assert embedder.num_texts == before  # each request text is embedded once


def test_index_is_cached_by_content(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    first = index(tmp_path, embedder)
    assert embedder.num_texts == 6
    files = list((tmp_path / "evidence").glob("leaves-*.npy"))
    assert len(files) == 1
    again = index(tmp_path, embedder)
    assert embedder.num_texts == 6 and np.array_equal(first.vectors, again.vectors)
    other = LeafIndex.from_tree(house_tree(), embedder, model_id="other-model",
                                cache_dir=tmp_path)
    assert embedder.num_texts == 12 and other.num_leaves == 6  # another model: new key
    files[0].write_bytes(b"not an array")
    index(tmp_path, embedder)  # a damaged file is re-embedded, not fatal
    assert embedder.num_texts == 18


# -- the prior -------------------------------------------------------------------------------

ROOT_MENU = Menu("", ("billing", "transfers", "weather"), (CompletionState.DONE,))
PRIOR = PriorOptions(weight=1.0, temperature=0.1, out_of_scope_score=0.3, done_gap=0.15,
                     back_gap=0.1)


def test_prior_at_the_root_before_and_after_calls() -> None:
    tree = house_tree()
    ev = evidence_with([0.8, 0.5, 0.2, 0.1, 0.4, 0.0])
    prior = menu_prior(ev, tree.root, ROOT_MENU, calls=(), options=PRIOR)
    assert prior.scores == pytest.approx({"billing": 0.8, "transfers": 0.4, "weather": 0.0,
                                          "DONE": 0.3})
    assert prior.bias == pytest.approx({"billing": 0.0, "transfers": -4.0, "weather": -8.0,
                                        "DONE": -5.0})
    # after pay_water was called: it counts as absent, and DONE = 0.8 - done_gap
    after = menu_prior(ev, tree.root, ROOT_MENU, calls=("billing/pay_water",), options=PRIOR)
    assert after.scores["billing"] == pytest.approx(0.5)
    assert after.scores["DONE"] == pytest.approx(0.65)
    assert after.bias["DONE"] == 0.0 and after.bias["billing"] == pytest.approx(-1.5)


def test_prior_for_back_and_inner_done() -> None:
    tree = house_tree()
    ev = evidence_with([0.2, 0.1, 0.7, 0.3, 0.4, 0.0])
    billing = tree.node("billing")
    fresh = Menu("billing", ("pay_water", "pay_power"), (CompletionState.BACK,))
    prior = menu_prior(ev, billing, fresh, calls=(), options=PRIOR)
    assert prior.scores["BACK"] == pytest.approx(0.6)  # best elsewhere 0.7 - back_gap
    assert prior.bias == pytest.approx({"pay_water": -4.0, "pay_power": -5.0, "BACK": 0.0})
    with_output = Menu("billing", ("pay_water", "pay_power"), (CompletionState.DONE,))
    done = menu_prior(ev, billing, with_output, calls=("billing/pay_water",), options=PRIOR)
    assert done.scores["DONE"] == pytest.approx(0.6)
    assert done.scores["pay_water"] == -math.inf and done.bias["pay_water"] == -20.0


def test_prior_floors_and_switches_off() -> None:
    tree = house_tree()
    ev = evidence_with([0.9, 0.0, 0.0, 0.0, 0.0, -0.5])
    sharp = PriorOptions(weight=1.0, temperature=0.05, out_of_scope_score=0.3)
    floored = menu_prior(ev, tree.root, ROOT_MENU, calls=(), options=sharp)
    assert floored.bias["weather"] == -20.0  # (-0.5 - 0.9) / 0.05 = -28, floored
    assert floored.bias["transfers"] == pytest.approx(-18.0)
    off = menu_prior(ev, tree.root, ROOT_MENU, calls=(),
                     options=PriorOptions(weight=0.0))
    assert set(off.bias.values()) == {0.0}


# -- calibration files -----------------------------------------------------------------------

def test_calibration_round_trip_and_lookup(tmp_path: Path) -> None:
    options = RecoveryOptions(evidence_weight=0.7, evidence_aggregate=Aggregate.SOFTMAX,
                              beam_width=2)
    path = calibration_file("Some Model/v1.gguf", tmp_path)
    assert path.name == "Some_Model_v1.gguf.json"
    write_calibration(path, model="Some Model/v1.gguf", options=options,
                      measured={"dev": {"x": 3}})
    assert read_calibration(path) == options
    assert load_recovery_options("Some Model/v1.gguf", directory=tmp_path) == options
    assert load_recovery_options("unknown", directory=tmp_path) == RecoveryOptions()


def test_calibration_rejects_unknown_options(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"model": "m", "options": {"evidence_wieght": 1.0}}))
    with pytest.raises(InputError, match="evidence_wieght"):
        read_calibration(path)
    path.write_text("[]")
    with pytest.raises(InputError, match="a JSON object"):
        read_calibration(path)


def test_committed_calibrations_load() -> None:
    from stackroute.server.routing.calibration import CALIBRATION_DIR

    files = sorted(CALIBRATION_DIR.glob("*.json"))
    assert files, f"no calibration files under {CALIBRATION_DIR}"
    for path in files:
        read_calibration(path)


def test_the_policy_defaults_to_guided_where_a_calibration_exists(tmp_path: Path) -> None:
    from stackroute.server.routing.calibration import router_options
    from stackroute.server.routing.options import DraftSource, Policy

    options = RecoveryOptions(evidence_weight=0.4, is_contrast_enabled=True)
    write_calibration(calibration_file("m", tmp_path), model="m", options=options, measured={})
    guided = router_options("m", directory=tmp_path, speculation=DraftSource.ROUTES)
    assert guided.policy is Policy.GUIDED and guided.recovery == options
    assert guided.describe() == {"policy": "guided", "calibration": "m.json",
                                 "speculation": "routes", "unwinding": "off"}
    plain = router_options("other", directory=tmp_path, speculation=DraftSource.ROUTES)
    assert plain.policy is Policy.PLAIN and plain.describe()["speculation"] == "routes"
    forced = router_options("m", policy=Policy.PLAIN, directory=tmp_path)
    assert forced.recovery is None
    defaults = router_options("other", policy=Policy.GUIDED, directory=tmp_path)
    assert defaults.recovery == RecoveryOptions()
    assert defaults.calibration == "built-in defaults"
    named = router_options("other", calibration=calibration_file("m", tmp_path),
                           directory=tmp_path)
    assert named.policy is Policy.GUIDED and named.recovery == options
    with pytest.raises(InputError, match="does not exist"):
        router_options("m", calibration=tmp_path / "missing.json", directory=tmp_path)


def test_the_shipped_calibration_makes_the_embedded_model_guided() -> None:
    from stackroute.server.engines.model_store import DEFAULT_GGUF_FILENAME
    from stackroute.server.routing.calibration import router_options

    model = DEFAULT_GGUF_FILENAME.removesuffix(".gguf")  # the engine's info.model
    assert router_options(model).policy.value == "guided"
