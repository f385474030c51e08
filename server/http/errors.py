"""One JSON error shape for every error response, and the handlers that produce it.

    {"error": {"code": "queue_full", "message": "...", "type": "rate_limit_error",
               "param": null, "request_id": "..."}}

OpenAI clients read `error.message`; `code` is stable and machine-readable. The user's bad
input (`InputError`) is a 4xx with the error's own words. An engine's failure (`EngineError`)
is answered with the status its class carries (`http_status`, see `server/engines/base.py`):
a remote engine's upstream that is unreachable, broken, refuses our request or lacks a feature
is 502, overloaded 503 (with its `Retry-After`, when it sent one), too slow 504; an
`option_bias` the engine cannot apply for a menu is 501 (the server's own routing asked for
it, so it is not the client's to fix). Anything else is our bug: a 500 that shows only the
request id, with the traceback in the log line of that id.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from stackroute.runtime.errors import (
    ArgumentsError,
    CatalogError,
    InputError,
    StateError,
)
from stackroute.server.engines.base import ContextOverflowError, EngineError
from stackroute.server.redaction import redact_secrets
from stackroute.server.service.engine_queue import QueueFullError
from stackroute.server.service.store_records import StoreBusyError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)

# Status by InputError subclass (the most specific class wins); an error class may instead
# carry its own `http_status` (e.g. a not-found error: 404).
_STATUS_BY_CLASS: tuple[tuple[type[InputError], int], ...] = (
    (CatalogError, 422),
    (ArgumentsError, 422),
    (StateError, 409),  # the request is well-formed but the run's state does not allow it
    (ContextOverflowError, 400),
)
# What an engine error's status tells the client, before the error's own words.
_ENGINE_WORDS = {501: "the engine cannot do what this request needs of it",
                 502: "the upstream model server failed",
                 503: "the upstream model server is overloaded",
                 504: "the upstream model server did not answer in time"}
_TYPE_BY_STATUS = {400: "invalid_request_error", 401: "authentication_error",
                   403: "permission_error", 404: "not_found_error", 408: "timeout_error",
                   409: "conflict_error",
                   413: "invalid_request_error", 415: "invalid_request_error",
                   422: "invalid_request_error",
                   429: "rate_limit_error", 503: "service_unavailable"}


class ProblemDetail(BaseModel):
    """One located problem: a catalog node path, or a request field's dotted location."""

    path: str = Field(description="node path ('' is the root) or request field location")
    message: str


class ErrorDetail(BaseModel):
    code: str = Field(description="stable machine-readable error code")
    message: str = Field(description="what was expected and what arrived")
    type: str = Field(description="error class, in OpenAI's vocabulary")
    param: str | None = Field(None, description="the request field at fault, when one is")
    request_id: str | None = None
    problems: list[ProblemDetail] | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class UnsupportedFieldError(InputError):
    """A request field this server does not implement (named, never silently ignored)."""

    code = "unsupported_field"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        self.param = param
        super().__init__(message)


class InvalidParameterError(InputError):
    """A known request field with a value this server does not accept."""

    code = "invalid_parameter"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        self.param = param
        super().__init__(message)


def status_for(error: InputError) -> int:
    explicit = getattr(error, "http_status", None)
    if isinstance(explicit, int):
        return explicit
    for cls, status in _STATUS_BY_CLASS:
        if isinstance(error, cls):
            return status
    return 400


def error_response(status: int, *, code: str, message: str, param: str | None = None,
                   request_id: str | None = None, problems: Sequence[ProblemDetail] = (),
                   headers: dict[str, str] | None = None) -> JSONResponse:
    detail = ErrorDetail(code=code, message=_utf8(message), type=_TYPE_BY_STATUS.get(
                         status, "server_error"), param=None if param is None else _utf8(param),
                         request_id=request_id,
                         problems=[ProblemDetail(path=_utf8(p.path), message=_utf8(p.message))
                                   for p in problems] or None)
    return JSONResponse(ErrorResponse(error=detail).model_dump(exclude_none=True),
                        status_code=status, headers=headers)


def _utf8(text: str) -> str:
    """Text that encodes as UTF-8: a message that quotes the request can carry a lone
    surrogate (JSON allows the escape "\\ud800"), which would fail the response itself. And
    no secret: a URL's password is redacted from every error a client sees."""
    text = redact_secrets(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def request_id_of(request: Request) -> str | None:
    return getattr(request.state, "request_id", None)


def internal_error_response(request_id: str | None) -> JSONResponse:
    return error_response(500, code="internal_error", request_id=request_id,
                          message=f"internal server error (request id {request_id}); the "
                                  "server log has the details")


async def _input_error(request: Request, error: Exception) -> JSONResponse:
    if not isinstance(error, InputError):
        raise error
    problems: list[ProblemDetail] = []
    if isinstance(error, CatalogError):
        problems = [ProblemDetail(path=p.path, message=p.message) for p in error.problems]
    return error_response(status_for(error), code=error.code, message=str(error),
                          param=getattr(error, "param", None),
                          request_id=request_id_of(request), problems=problems)


async def _queue_full(request: Request, error: Exception) -> JSONResponse:
    if not isinstance(error, QueueFullError):
        raise error
    return error_response(429, code=error.code, message=str(error),
                          request_id=request_id_of(request),
                          headers={"Retry-After": str(error.retry_after_s)})


def engine_error_status(error: EngineError) -> tuple[int, str, dict[str, str] | None]:
    """Status, message and headers for an engine's failure: the status its class carries
    (see the module), with `Retry-After` when an overloaded upstream sent one."""
    status = int(error.http_status)
    words = _ENGINE_WORDS.get(status, "the engine failed")
    headers = None
    if status in (429, 503) and error.retry_after_s is not None:
        headers = {"Retry-After": str(max(1, math.ceil(error.retry_after_s)))}
    return status, f"{words}: {error}", headers


async def _engine_error(request: Request, error: Exception) -> JSONResponse:
    if not isinstance(error, EngineError):
        raise error
    status, message, headers = engine_error_status(error)
    rid = request_id_of(request)
    if status >= 500 and status not in _ENGINE_WORDS:  # the engine's bug or ours
        log.error("engine error answered %d", status, exc_info=error,
                  extra={"request_id": rid, "code": error.code})
        return internal_error_response(rid)
    log.warning("engine failure answered %d: %s", status, error,
                extra={"request_id": rid, "code": error.code})
    return error_response(status, code=error.code, message=message, request_id=rid,
                          headers=headers)


async def _store_busy(request: Request, error: Exception) -> JSONResponse:
    """The session store stayed locked past its busy timeout (another process holds it):
    nothing was changed, and the client may retry."""
    if not isinstance(error, sqlite3.OperationalError | StoreBusyError):
        raise error
    rid = request_id_of(request)
    log.warning("session store busy: %s", error, extra={"request_id": rid})
    return error_response(503, code="store_busy", request_id=rid,
                          message="the session store is busy; nothing was changed, retry later",
                          headers={"Retry-After": "1"})


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    """Unknown fields → 400 naming them (never silently ignored); other problems → 422."""
    if not isinstance(error, RequestValidationError):
        raise error
    items = list(error.errors())
    unknown = [_field_name(e["loc"]) for e in items if e.get("type") == "extra_forbidden"]
    rid = request_id_of(request)
    if unknown:
        return error_response(400, code=UnsupportedFieldError.code,
                              message=unsupported_fields_message(unknown), param=unknown[0],
                              request_id=rid)
    problems = [ProblemDetail(path=_field_name(e["loc"]), message=str(e.get("msg", "")))
                for e in items]
    head = "; ".join(f"{p.path or 'body'}: {p.message}" for p in problems[:5])
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    return error_response(422, code="invalid_request", message=f"invalid request: {head}{more}",
                          param=problems[0].path if problems else None, request_id=rid,
                          problems=problems)


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    if not isinstance(error, StarletteHTTPException):
        raise error
    codes = {404: "not_found", 405: "method_not_allowed", 401: "invalid_api_key"}
    return error_response(error.status_code, code=codes.get(error.status_code, "http_error"),
                          message=str(error.detail), request_id=request_id_of(request),
                          headers=dict(error.headers or {}) or None)


# What legacy vLLM fields became, so a client ported from vLLM learns the new spelling.
LEGACY_HINTS = {
    "guided_choice": 'structured_outputs: {"choice": [...]}',
    "guided_json": 'structured_outputs: {"json": schema} or response_format json_schema',
    "guided_regex": 'structured_outputs: {"regex": "..."}',
    "guided_grammar": "nothing: grammars are not supported",
    "guided_decoding_backend": "nothing: the engine picks its grammar backend",
}


def unsupported_fields_message(fields: Iterable[str]) -> str:
    names = list(dict.fromkeys(fields))
    hints = [f"{n} (use {LEGACY_HINTS[n.rsplit('.', 1)[-1]]})" for n in names
             if n.rsplit(".", 1)[-1] in LEGACY_HINTS]
    text = f"unsupported field(s): {', '.join(names)}; this server rejects fields it does " \
           "not implement instead of ignoring them"
    return text + (f". Instead: {'; '.join(hints)}" if hints else "")


def _field_name(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "query", "path", "header"}:
        parts = parts[1:]
    return ".".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers; unexpected exceptions are caught by the request middleware."""
    app.add_exception_handler(InputError, _input_error)
    app.add_exception_handler(QueueFullError, _queue_full)
    app.add_exception_handler(EngineError, _engine_error)
    app.add_exception_handler(sqlite3.OperationalError, _store_busy)
    app.add_exception_handler(StoreBusyError, _store_busy)  # PostgreSQL unreachable for now
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)


def document_error_responses(app: FastAPI) -> None:
    """Make the OpenAPI schema say what the handlers above do, on every route: validation
    errors are 422 in the one error shape (not FastAPI's default `HTTPValidationError`), an
    unknown body field is 400, and any request with a body can be refused with 413."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _with_error_shape(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _with_error_shape(spec: dict[str, Any]) -> dict[str, Any]:
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in ErrorResponse.model_json_schema(
            ref_template="#/components/schemas/{model}").get("$defs", {}).items():
        schemas.setdefault(name, schema)
    schemas.setdefault("ErrorResponse", {k: v for k, v in ErrorResponse.model_json_schema(
        ref_template="#/components/schemas/{model}").items() if k != "$defs"})
    shape = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    for operations in spec.get("paths", {}).values():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status, response in responses.items():
                if "HTTPValidationError" in json.dumps(response.get("content", {})):
                    responses[status] = {"description": "Request failed validation",
                                         "content": shape}
                elif str(status)[0] in "45" and "application/json" not in response.get(
                        "content", {"application/json": None}):
                    # A route with its own response class (NDJSON, SSE) still answers
                    # errors in the one JSON shape.
                    response["content"] = shape
            if "requestBody" in operation:
                responses.setdefault("400", {"description": "Unsupported field or value",
                                             "content": shape})
            # the edge (origin_guard.py, storable_text.py) answers these before any route
            responses.setdefault("400", {"description": "Text no store can keep (NUL, an "
                                                        "unpaired surrogate)", "content": shape})
            responses.setdefault("403", {"description": "Host or Origin not allowed (DNS "
                                                        "rebinding and cross-site guard)",
                                         "content": shape})
            if method not in {"get", "head", "options"}:  # the body limit reads these bodies
                responses.setdefault("415", {"description": "A content type a web page may "
                                                            "send cross-site (text/plain, "
                                                            "forms)", "content": shape})
                responses.setdefault("413", {"description": "Request body too large",
                                             "content": shape})
                responses.setdefault("408", {"description": "Request body not received "
                                                            "within body_timeout_s",
                                             "content": shape})
    if "HTTPValidationError" not in json.dumps(spec["paths"]):
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
    return spec


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for these error statuses, all with the one error shape."""
    words = {400: "Bad request: an unsupported field or value", 401: "Missing or wrong API key",
             403: "Forbidden by this server's settings (e.g. auto_approve)",
             404: "Not found", 409: "Conflict with the current state",
             413: "Request body too large", 422: "Request failed validation",
             429: "Engine queue full; see Retry-After", 500: "Internal error (see request id)",
             501: "The engine cannot do what this request needs of it",
             502: "The remote engine's upstream failed, refused, or lacks a feature",
             503: "Not ready, or the upstream is overloaded (see Retry-After)",
             504: "The remote engine's upstream did not answer in time"}
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        entry: dict[str, Any] = {"model": ErrorResponse, "description": words.get(status, "")}
        if status == 429:
            entry["headers"] = {"Retry-After": {"description": "seconds to wait",
                                                "schema": {"type": "integer"}}}
        out[status] = entry
    return out
