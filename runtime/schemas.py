"""JSON Schema checks for leaf parameters: is a schema valid, do arguments validate.

Validating a schema against the 2020-12 metaschema costs about 1 ms in `jsonschema` (it walks
`$dynamicRef`s and vocabularies), which made the 4,076 seal-tools schemas take 5 s. Most real
schemas use a small vocabulary, so a strict structural check accepts those in microseconds;
anything it does not fully understand goes to the metaschema. The fast path only ever says
"valid" for schemas the metaschema also accepts (it checks a subset of keywords, each at least
as strictly); `tests/runtime/test_schemas.py` compares the two on a table and on random schemas.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import referencing.exceptions

# The "regex" format is asserted: a `pattern` Python's `re` cannot compile would otherwise load
# and then crash argument validation in the middle of a run.
_META_VALIDATOR = jsonschema.Draft202012Validator(
    jsonschema.Draft202012Validator.META_SCHEMA,
    format_checker=jsonschema.FormatChecker(formats=["regex"]),
)
_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_ANY_VALUE_KEYS = frozenset({"default", "const"})
_STRING_KEYS = frozenset({"description", "title", "format", "pattern", "$comment"})
_COUNT_KEYS = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
_NUMBER_KEYS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
_MAX_FAST_DEPTH = 32
_NO_RETRIEVAL: referencing.Registry[Any] = referencing.Registry()


def schema_error(schema: Mapping[str, Any]) -> str | None:
    """Return why `schema` is not a valid 2020-12 JSON Schema, or None if it is."""
    if _is_simple_valid(schema, 0):
        return None
    try:
        error = jsonschema.exceptions.best_match(_META_VALIDATOR.iter_errors(schema))
    except RecursionError:
        return "nested too deeply"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.path) or "(top)"
    return f"at {where}: {error.message}"


def _is_simple_valid(schema: Any, depth: int) -> bool:
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > _MAX_FAST_DEPTH:
        return False
    for key, value in schema.items():
        if not isinstance(key, str):  # YAML allows non-string keys; let the metaschema decide
            return False
        if key in _ANY_VALUE_KEYS or key.startswith("x-"):
            continue
        if key in _STRING_KEYS:
            if not isinstance(value, str):
                return False
            if key == "pattern" and not _is_regex(value):
                return False
        elif key == "examples":
            if not isinstance(value, list):
                return False
        elif key in _COUNT_KEYS:
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                return False
        elif key in _NUMBER_KEYS:
            if not (isinstance(value, int | float) and not isinstance(value, bool)):
                return False
            if key == "multipleOf" and value <= 0:
                return False
        elif key == "type":
            if isinstance(value, str):
                if value not in _TYPES:
                    return False
            elif not (isinstance(value, list) and value and len(set(map(str, value))) == len(value)
                      and all(isinstance(t, str) and t in _TYPES for t in value)):
                return False
        elif key == "enum":
            if not isinstance(value, list):
                return False
        elif key == "required":
            if not (isinstance(value, list) and all(isinstance(r, str) for r in value)
                    and len(set(value)) == len(value)):
                return False
        elif key == "properties":
            if not isinstance(value, dict) or not all(
                _is_simple_valid(v, depth + 1) for v in value.values()
            ):
                return False
        elif key in ("items", "additionalProperties"):
            if not _is_simple_valid(value, depth + 1):
                return False
        elif key == "uniqueItems":
            if not isinstance(value, bool):
                return False
        else:
            return False  # a keyword the fast path does not know: let the metaschema decide
    return True


def _is_regex(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


@dataclass(frozen=True)
class ArgumentProblem:
    """One reason arguments fail their schema: where (`location`, the path into the
    arguments; empty for the object as a whole; None where the schema itself cannot be
    applied) and what."""

    location: tuple[str | int, ...] | None
    message: str

    @property
    def property(self) -> str | None:
        """The top-level property the problem lies in (None: the object as a whole, e.g. a
        missing required property or an `anyOf` over the object)."""
        first = self.location[0] if self.location else None
        return first if isinstance(first, str) else None

    def __str__(self) -> str:
        if self.location is None:
            return self.message
        return f"{'/'.join(str(p) for p in self.location) or '(top)'}: {self.message}"


def argument_problems(schema: Mapping[str, Any] | None,
                      arguments: Mapping[str, Any]) -> list[ArgumentProblem]:
    """Every reason `arguments` fail `schema` (empty when they validate)."""
    if schema is None:
        return [] if not arguments else [
            ArgumentProblem(None, f"takes no arguments, got {sorted(arguments)}")]
    # An empty registry: a remote `$ref` is unresolvable instead of fetched (by default
    # jsonschema would GET any URL a catalog names).
    validator = jsonschema.Draft202012Validator(schema, registry=_NO_RETRIEVAL)
    try:
        return [ArgumentProblem(tuple(e.path), e.message)
                for e in validator.iter_errors(dict(arguments))]
    except referencing.exceptions.Unresolvable as e:
        # A `$ref` the metaschema accepts but nothing resolves: report it, don't crash the run.
        return [ArgumentProblem(
            None, f"the schema cannot be applied: unresolvable reference ({e})")]
    except RecursionError:  # a `$ref` cycle that never reaches a value (schema_hazards)
        return [ArgumentProblem(None, "the schema cannot be applied: its references recurse "
                                    "without end")]


def argument_errors(schema: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> list[str]:
    """Every reason `arguments` fail `schema`, in words (empty when they validate)."""
    return [str(p) for p in argument_problems(schema, arguments)]


def value_checker(schema: Mapping[str, Any]) -> Callable[[Any], bool]:
    """A test of one value against `schema` (a property's own schema): False where any of its
    keywords refuses the value. A reference the schema alone cannot resolve (`#/$defs/...` of
    the enclosing schema), or that recurses without end, refuses nothing here: the whole
    call's validation (`argument_errors`) still applies it."""
    validator = jsonschema.Draft202012Validator(schema, registry=_NO_RETRIEVAL)

    def fits(value: Any) -> bool:
        try:
            return validator.is_valid(value)
        except (referencing.exceptions.Unresolvable, RecursionError):
            return True

    return fits


def is_json_object(text: str) -> bool:
    """Whether `text` parses as a JSON object (arguments a model wrote, cut off or not)."""
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False
