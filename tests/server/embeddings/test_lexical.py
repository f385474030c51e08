"""Lexical evidence (embeddings/lexical.py) and the hybrid leaf score (leaf_index.py): tables of
inputs and exact outputs, no model; and every doctest of the evidence and routing modules."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import numpy as np
import pytest
from doubles import WordEmbedder
from stackroute.runtime.catalog import build_tree
from stackroute.server.embeddings import leaf_index as leaf_index_module
from stackroute.server.embeddings.leaf_index import LeafIndex
from stackroute.server.embeddings.lexical import Bm25Index, name_share, tokens


@pytest.mark.parametrize(("text", "words"), [
    ("Send money to Asha", ["send", "money", "asha"]),
    ("getWaterQuality of lakes", ["get", "water", "quality", "lake"]),
    ("pay_utility_bills, please!", ["pay", "utility", "bill"]),
    ("the policies", ["policy"]),
    ("glass class", ["glass", "class"]),
    ("getECGSample for the PDFReport", ["get", "ecg", "sample", "pdf", "report"]),  # acronyms
])
def test_tokens(text: str, words: list[str]) -> None:
    assert tokens(text) == words


@pytest.mark.parametrize(("name", "text", "share"), [
    ("joinGameServer", "Please start the game server H6kW", 2 / 3),  # the verb counts too
    ("send_money", "Send 500 dollars to Asha", 1 / 2),  # snake_case
    ("getAvianSpecies", "Which species of avian flu reach cats?", 2 / 3),  # "get" is a word
    ("calculateTax", "the tax calculation for 2024", 1.0),  # the first 5 letters match
    ("getPrograms", "Create a youth program in London", 1 / 2),  # plurals folded
    ("go", "go now", 1.0),  # no word of three letters: nothing to miss
    ("resizeImage", "Create a graphic 88 wide", 0.0),
    ("getECGSample", "Retrieve the ECG sample for patient 7", 2 / 3),  # an acronym is a word
    ("getBuildingInfo", "information about the building", 2 / 3),  # a short word's prefix
    ("getCarInsurance", "insure my cardigan", 1 / 3),  # "car" is not "cardigan"'s start
])
def test_name_share(name: str, text: str, share: float) -> None:
    assert name_share(name, text) == pytest.approx(share)


def test_bm25_prefers_rare_shared_words_and_ignores_values() -> None:
    index = Bm25Index.from_texts(["send money to a person", "pay a bill with money",
                                  "weather forecast for a city"])
    send = index.scores("send money")
    assert send.argmax() == 0 and send[2] == 0.0
    assert float(send[0]) == pytest.approx(float(index.scores("send money 500 ID-77")[0]))
    assert np.all(index.scores("quantum chromodynamics") == 0.0)
    assert np.all((send >= 0.0) & (send <= 1.0))


def test_bm25_and_leaf_text_split_an_acronym_from_the_word_after_it() -> None:
    """One splitter for every layer: a request that says "ECG" finds `getECGSample` in BM25
    and in the embedded leaf text, as the abstention check's name share does."""
    tree = build_tree({"name": "root", "children": [
        {"name": "getECGSample", "description": "A patient's recording."},
        {"name": "getSample", "description": "A soil sample."}]})
    assert leaf_index_module.leaf_text(next(tree.leaves())).startswith("get ecg sample:")
    index = Bm25Index.from_texts(["getECGSample", "getSample"])
    scores = index.scores("the ECG of patient 7")
    assert scores[0] > 0.0 and scores[1] == 0.0


def test_one_exact_word_scores_one_over_one_plus_k1() -> None:
    """The ceiling is BM25's saturation (a word repeated without end); one occurrence in a
    document of average length reaches 1 / (1 + k1) of it."""
    index = Bm25Index.from_texts(["forecast", "bill"])
    assert float(index.scores("forecast")[0]) == pytest.approx(1 / 2.2)


CATALOG = {"name": "r", "children": [
    {"name": "pay_bill", "description": "Pay a utility bill.",
     "parameters": {"type": "object", "properties": {
         "biller": {"type": "string", "description": "electricity or water company"}}}},
    {"name": "send_money", "description": "Send money to a person.",
     "examples": ["wire cash to grandma"]},
]}


def test_examples_count_as_evidence_for_their_leaf() -> None:
    tree = build_tree(CATALOG)
    plain = LeafIndex.from_tree(tree, WordEmbedder(), model_id="w", lexical_weight=0.0)
    assert plain.example_rows is not None and plain.example_rows.tolist() == [1]
    embedder = WordEmbedder()
    evidence = plain.evidence(embedder.embed(["wire cash to grandma"])[0])
    assert evidence.best()[0] == "send_money"
    assert evidence.scores[1] == pytest.approx(1.0)


def test_parameters_text_and_the_lexical_mix() -> None:
    tree = build_tree(CATALOG)
    embedder = WordEmbedder()
    mixed = LeafIndex.from_tree(tree, embedder, model_id="w", lexical_weight=0.5)
    query = "the electricity company"
    vector = embedder.embed([query])[0]
    dense = mixed.vectors @ vector
    lexical = mixed.lexical.scores(query) if mixed.lexical is not None else None
    assert lexical is not None and lexical[0] > 0 and dense[0] > 0  # the parameter's words
    assert mixed.evidence(vector, query).scores == pytest.approx(0.5 * dense + 0.5 * lexical)
    assert mixed.evidence(vector).scores == pytest.approx(dense)  # no text: dense only


@pytest.mark.parametrize("package", ["stackroute.server.embeddings",
                                     "stackroute.server.routing",
                                     "stackroute.server.routing.arguments"])
def test_doctests(package: str) -> None:
    root = importlib.import_module(package)
    attempted = 0
    for info in pkgutil.iter_modules(root.__path__):
        result = doctest.testmod(importlib.import_module(f"{package}.{info.name}"))
        assert result.failed == 0, info.name
        attempted += result.attempted
    assert attempted > 0
    assert leaf_index_module.DEFAULT_LEXICAL_WEIGHT == 0.5
