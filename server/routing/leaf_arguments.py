"""A chosen leaf's arguments as values: what one generation (and its fallback) produced, and
the decision it makes with the menu step that chose the leaf.

`EngineRouter._arguments` returns a `GeneratedArguments`; `leaf_decision` turns it into the
`Decision` the machine applies. Text that is not a JSON object (cut off at the token cap, or
malformed) stays text: `Decision.arguments` is None and the machine records an arguments
misstep with the text as the model's answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stackroute.runtime.decision import ArgumentsCall, Decision
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Generation
from stackroute.server.routing.recovery import MenuStep


@dataclass(frozen=True)
class GeneratedArguments:
    generation: Generation  # the generation kept
    usage: Usage  # what every attempt cost together
    fallback: str | None = None  # e.g. "required_only": the first attempt ran out of tokens
    # how each property got its value (`ValueChoice.to_dict()`: name, source, candidates...)
    value_choices: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    written_values: tuple[str, ...] = ()  # required values the model wrote (the fallback)
    missing_values: tuple[str, ...] = ()  # required values left out, to be asked of the user


def leaf_decision(step: MenuStep, generated: GeneratedArguments) -> Decision:
    """The decision for a leaf chosen by `step`, with its generated arguments."""
    generation, usage = generated.generation, generated.usage
    return Decision(choice=step.choice, arguments=json_object(generation.text),
                    probabilities=step.probabilities, margin=step.margin,
                    usage=step.usage + usage, arguments_text=generation.text,
                    arguments_call=ArgumentsCall(usage=usage,
                                                 finish_reason=generation.finish_reason,
                                                 fallback=generated.fallback),
                    written_values=generated.written_values,
                    missing_values=generated.missing_values,
                    detail={**step.detail, "value_choices": list(generated.value_choices)}
                    if generated.value_choices else step.detail)


def json_object(text: str) -> dict[str, Any] | None:
    """`text` parsed when it is a JSON object, else None.

    >>> json_object('{"a": 1}'), json_object('{"a": '), json_object('[1]')
    ({'a': 1}, None, None)
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def required_only(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """`schema` with only its required properties (no others allowed), or None when that
    changes nothing.

    >>> required_only({"type": "object", "properties": {"a": {}, "note": {}},
    ...                "required": ["a"]})
    {'type': 'object', 'properties': {'a': {}}, 'required': ['a'], 'additionalProperties': False}
    """
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    required = [r for r in schema.get("required", ()) if r in properties]
    if len(required) == len(properties) and schema.get("additionalProperties") is False:
        return None
    narrowed = dict(schema)
    narrowed["properties"] = {name: properties[name] for name in required}
    narrowed["additionalProperties"] = False
    return narrowed
