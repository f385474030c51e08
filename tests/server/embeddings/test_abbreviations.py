"""Abbreviations of a catalog's words in a request ("odo", "rpt", "appt"): read against the
catalog's own words and a dictionary of whole words (the embedding model's vocabulary)."""

from __future__ import annotations

import pytest
from doubles import LogitEngine, WordEmbedder
from stackroute.runtime.catalog import build_tree
from stackroute.server.commands.common import RoutingFlags
from stackroute.server.embeddings.abbreviations import Abbreviations, default_dictionary
from stackroute.server.embeddings.leaf_index import EvidenceSource, LeafIndex
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.router import default_embedder, evidence_for_tree
from stackroute.server.settings import ServerSettings

CATALOG_WORDS = ("odometer", "vehicle", "report", "receipt", "ticket", "appointment",
                 "application", "account", "activity", "affected", "management", "quantity",
                 "password", "confirmation", "harsh", "unreal", "jumping", "please")


@pytest.fixture(scope="module")
def real_dictionary() -> frozenset[str]:
    return default_dictionary()


@pytest.mark.parametrize(("word", "expansions"), [
    ("odo", ("odometer",)),  # the first letters
    ("rpt", ("receipt", "report")),  # both hold r p t to their last consonant
    ("tkt", ("ticket",)),
    ("appt", ("appointment",)),  # not application: a p l c… skips two
    ("acct", ("account",)),  # one that ends at the last consonant beats activity, affected
    ("mgmt", ("management",)),
    ("qty", ("quantity",)),  # "y" is a consonant
    ("pwd", ("password",)),  # a doubled consonant counts once
    ("conf", ("confirmation",)),
    ("hrs", ()),  # "hours", not "harsh": three letters end at the last consonant
    ("pls", ()),  # "please" is a stop word, no catalog word of its own
    ("car", ()), ("van", ()), ("report", ()),  # words, and the catalog's own
    ("ODO", ()),  # written in capitals: an acronym, not shorthand
    ("ve", ()),  # two letters abbreviate nothing
])
def test_expansions_with_the_real_dictionary(real_dictionary: frozenset[str], word: str,
                                             expansions: tuple[str, ...]) -> None:
    assert Abbreviations.of(CATALOG_WORDS, real_dictionary).expansions(word) == expansions


def test_a_word_of_an_address_or_a_file_name_is_no_shorthand(
        real_dictionary: frozenset[str]) -> None:
    abbreviations = Abbreviations.of(CATALOG_WORDS, real_dictionary)
    assert abbreviations.expand("rotate photo1.jpg, see https://x.io/rpt or a@rpt.io") \
        == "rotate photo1.jpg, see https://x.io/rpt or a@rpt.io"
    assert abbreviations.expand("van 12 odo 48,210 mi; rpt pls") \
        == "van 12 odometer 48,210 mi; receipt report pls"


def test_without_a_dictionary_nothing_is_read_as_shorthand() -> None:
    assert Abbreviations.of(CATALOG_WORDS, ()).expand("van 12 odo") == "van 12 odo"


FLEET = {"name": "root", "description": "fleet", "children": [
    {"name": "vehicles", "description": "Vehicles.", "children": [
        {"name": "update_odometer", "description": "Record a vehicle's odometer."},
        {"name": "register_vehicle", "description": "Add a new van or truck."}]}]}


def test_the_evidence_reads_an_abbreviation_as_the_catalog_word() -> None:
    tree = build_tree(FLEET)
    embedder = WordEmbedder()
    index = LeafIndex.from_tree(tree, embedder, model_id="words")
    plain = EvidenceSource(index, embedder)
    read = EvidenceSource(index, embedder, dictionary={"van", "new", "mi"})
    assert plain.for_request("van 12 odo 48,210 mi").best()[0] == "vehicles/register_vehicle"
    assert read.reading("van 12 odo 48,210 mi") == "van 12 odometer 48,210 mi"
    assert read.for_request("van 12 odo 48,210 mi").best()[0] == "vehicles/update_odometer"


def test_the_setting_and_the_flag_turn_shorthand_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ServerSettings.default("shorthand") is True
    shipped = RouterOptions(recovery=None, speculation=DraftSource.OFF)
    assert shipped.shorthand and "shorthand" not in shipped.describe()
    options = RoutingFlags.parse(policy="plain", calibration=None,
                                 shorthand=False).options_for(LogitEngine({}))
    assert not options.shorthand and options.describe()["shorthand"] == "off"
    monkeypatch.setenv("STACKROUTE_SHORTHAND", "false")
    assert not ServerSettings.load().router_options("fake-model").shorthand


def test_the_real_embedders_evidence_reads_shorthand_unless_turned_off() -> None:
    tree, request = build_tree(FLEET), "van 12 odo 48,210 mi"
    on = evidence_for_tree(tree, default_embedder())
    off = evidence_for_tree(tree, default_embedder(), shorthand=False)
    assert on.reading(request) == "van 12 odometer 48,210 mi"
    assert off.reading(request) == request
    assert on.for_request(request).best()[0] == "vehicles/update_odometer"
