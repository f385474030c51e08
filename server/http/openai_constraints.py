"""The constraint an OpenAI-style request asks for (vLLM's `structured_outputs` or OpenAI's
`response_format`), checked: one kind at a time, choice lists bounded, and schemas and regexes
within the grammar budget (`runtime/grammar_budget.py`: 422 naming the construct)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from stackroute.runtime.grammar_budget import regex_budget_problem, schema_budget_problem
from stackroute.server.engines.base import Constraint
from stackroute.server.http.errors import InvalidParameterError
from stackroute.server.http.openai_schemas import (
    ChatCompletionRequest,
    CompletionRequest,
    ResponseFormatJsonObject,
    ResponseFormatJsonSchema,
)


def request_constraint(body: ChatCompletionRequest | CompletionRequest,
                max_menu_options: int) -> Constraint | None:
    """The one constraint a request asks for, from `structured_outputs` or `response_format`."""
    structured = body.structured_outputs
    fmt = body.response_format
    is_format_constrained = isinstance(fmt, ResponseFormatJsonObject | ResponseFormatJsonSchema)
    if structured is not None and is_format_constrained:
        raise InvalidParameterError("send structured_outputs or a json response_format, not "
                                    "both", param="response_format")
    if structured is not None:
        kinds = [k for k, v in (("choice", structured.choice), ("json", structured.json_schema),
                                ("regex", structured.regex)) if v is not None]
        if len(kinds) != 1:
            raise InvalidParameterError(
                "structured_outputs needs exactly one of choice, json, regex; got "
                f"{', '.join(kinds) or 'none'}", param="structured_outputs")
        if structured.choice is not None:
            return Constraint.choice(_checked_choices(structured.choice, max_menu_options))
        if structured.regex is not None:
            _check_budget(regex_budget_problem(structured.regex), "structured_outputs.regex")
            return Constraint.regex(structured.regex)
        schema = _schema_object(structured.json_schema, "structured_outputs.json")
        _check_budget(schema_budget_problem(schema), "structured_outputs.json")
        return Constraint.json(schema)
    if isinstance(fmt, ResponseFormatJsonSchema):
        _check_budget(schema_budget_problem(fmt.json_schema.json_schema),
                      "response_format.json_schema.schema")
        return Constraint.json(fmt.json_schema.json_schema)
    if isinstance(fmt, ResponseFormatJsonObject):
        return Constraint.json({"type": "object"})
    return None


class ConstraintBudgetError(InvalidParameterError):
    """A schema or regex whose grammar would be too large to compile (runtime/grammar_budget)."""

    code = "constraint_too_large"
    http_status = 422


def _check_budget(problem: str | None, param: str) -> None:
    if problem is not None:
        raise ConstraintBudgetError(f"{param} is too large to compile: {problem}", param=param)


def _checked_choices(choices: Sequence[str], max_options: int) -> list[str]:
    param = "structured_outputs.choice"
    if not choices:
        raise InvalidParameterError("structured_outputs.choice is empty; list at least one "
                                    "option", param=param)
    if len(choices) > max_options:
        raise InvalidParameterError(f"structured_outputs.choice has {len(choices)} options; "
                                    f"the limit is {max_options}", param=param)
    if len(set(choices)) != len(choices):
        raise InvalidParameterError("structured_outputs.choice has duplicate options",
                                    param=param)
    for option in choices:
        if not option or option[0].isspace():
            raise InvalidParameterError(f"structured_outputs.choice option {option!r} is empty "
                                        "or starts with whitespace", param=param)
    return list(choices)


def _schema_object(schema: dict[str, Any] | str | None, param: str) -> dict[str, Any]:
    if isinstance(schema, dict):
        return schema
    try:
        parsed = json.loads(schema or "")
    except ValueError as error:
        raise InvalidParameterError(f"{param} is not valid JSON: {error}", param=param) from None
    if not isinstance(parsed, dict):
        raise InvalidParameterError(f"{param} must be a JSON object", param=param)
    return parsed
