"""Combinators xgrammar reads apart from their parent (grammars/combinators.py): a held-out
fleet desk's geofence (`required` name and radius, `anyOf` an address or both coordinates)
compiled to a grammar that took `{"address":{"type":"string"}}` and refused every valid call:
xgrammar drops what stands beside an `anyOf`; an `allOf` of several schemas took `{}` and
refused the object that meets them all."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from stackroute.grammars.bounded import bounded_schema
from stackroute.grammars.schema import GrammarTokenizerInfo, compile_schema

GEOFENCE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "address": {"type": "string"},
                   "center_lat": {"type": "number"}, "center_lon": {"type": "number"},
                   "radius_m": {"type": "number", "minimum": 25}},
    "required": ["name", "radius_m"],
    "anyOf": [{"required": ["address"]}, {"required": ["center_lat", "center_lon"]}],
    "additionalProperties": False,
}
BOTH = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string", "enum": ["x", "y"]}},
    "allOf": [{"required": ["a"]}, {"required": ["b"]}],
}
DERIVED = {  # a model's fields beside its base's, as schema generators write them
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "required": ["a"],
    "allOf": [{"$ref": "#/$defs/Base"}],
    "$defs": {"Base": {"type": "object", "properties": {"b": {"type": "string"}},
                       "required": ["b"]}},
}
SESSION = {
    "type": "object",
    "properties": {"session_id": {"type": "string"}, "station_id": {"type": "string"},
                   "reason": {"type": "string", "enum": ["fault", "user_request"]}},
    "oneOf": [{"required": ["session_id"]}, {"required": ["station_id"]}],
}


def accepts(info: GrammarTokenizerInfo, tokenizer: Any, schema: dict[str, Any],
            text: str) -> bool:
    matcher = compile_schema(bounded_schema(schema, 200), info).matcher()
    tokens = tokenizer.encode(text, add_special_tokens=False)
    return all(matcher.accept(t) for t in tokens) and matcher.accept(info.stop_token_ids[0])


@pytest.mark.parametrize(("schema", "text", "valid"), [
    (GEOFENCE, '{"name":"Plano Yard","address":"1 Main St","radius_m":250}', True),
    (GEOFENCE, '{"name":"Plano Yard","center_lat":33.0198,"center_lon":-96.6989,'
               '"radius_m":250}', True),
    (GEOFENCE, '{"name":"Plano Yard","radius_m":250}', False),  # neither alternative
    (GEOFENCE, '{"address":{"type":"string"}}', False),  # what the grammar wrote
    (SESSION, '{"session_id":"CHG-7f3a91c2","reason":"fault"}', True),
    (SESSION, '{"reason":"fault"}', False),
    (BOTH, '{"a":1,"b":"x"}', True),
    (BOTH, '{"a":1}', False),
    (BOTH, '{}', False),
    (BOTH, '{"a":1,"b":"z"}', False),
    (DERIVED, '{"a":1,"b":"x"}', True),
    (DERIVED, '{"b":"x"}', False),
])
def test_the_grammar_takes_what_the_schema_takes(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo,
        schema: dict[str, Any], text: str, valid: bool) -> None:
    assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)) is valid
    assert accepts(smollm2_grammar_info, smollm2_tokenizer, schema, text) is valid
