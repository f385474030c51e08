"""Hostile requests against a running server: schemathesis over its OpenAPI schema, and our own
hypothesis strategies for what a schema does not describe (mutated run states, broken bodies,
hostile headers and path segments). Every answer must be a success or a 4xx in the one error
shape, within `MAX_SECONDS`; the server must stay healthy. Needs `hypothesis` and
`schemathesis` (the dev extra).

    stats = FuzzStats()
    known = seed_server(base_url)          # a catalog and sessions for ids that exist
    run_schemathesis(base_url, known, max_examples=50, stats=stats)
    run_hostile_requests(base_url, known, max_examples=300, stats=stats)
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as fixed_seed
from hypothesis import strategies as st

MAX_SECONDS = 10.0  # one answer; slower is a hang
SEED_TIMEOUT_S = 180.0  # seeding requests (see seed_server)
_JSON_ERROR_CODES = range(400, 600)
# What a catalog with a plan-following leaf looks like (the scripted engine routes it).
SEED_CATALOG = {"name": "fuzz", "description": "fuzz target", "children": [
    {"name": "pay", "description": "payments", "children": [
        {"name": "send", "description": "send money", "sensitive": True,
         "parameters": {"type": "object", "properties": {"ref": {"type": "string"},
                                                         "amount": {"type": "integer"}},
                        "required": ["ref", "amount"]}},
        {"name": "balance", "description": "show the balance"}]},
    {"name": "help", "description": "help text"}]}


@dataclass
class Known:
    """Ids that exist on the server, so generated requests reach past the 404s."""

    catalog_id: str
    session_ids: list[str]
    state: dict[str, Any]  # a valid run state (for /v1/route), to mutate


@dataclass
class FuzzStats:
    num_cases: Counter[str] = field(default_factory=Counter)  # by phase
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    slowest_s: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.num_cases.values())

    def record(self, phase: str, method: str, url: str, response: httpx.Response | None,
               seconds: float, problem: str | None) -> None:
        self.num_cases[phase] += 1
        self.slowest_s = max(self.slowest_s, seconds)
        if response is not None:
            self.statuses[response.status_code] += 1
        if problem is not None and len(self.failures) < 200:
            self.failures.append(f"[{phase}] {method} {url[:200]}: {problem}")


def answer_problem(response: httpx.Response, seconds: float) -> str | None:
    """Why this answer breaks the contract, or None."""
    if seconds > MAX_SECONDS:
        return f"answered after {seconds:.1f} s"
    status = response.status_code
    if status >= 500:
        return f"{status}: {response.text[:300]}"
    if status in _JSON_ERROR_CODES:
        try:
            error = response.json().get("error")
        except (ValueError, AttributeError):
            return f"{status} without a JSON error body: {response.text[:200]!r}"
        if not isinstance(error, dict) or not error.get("code") or not error.get("message"):
            return f"{status} without an error code and message: {response.text[:200]}"
    if "x-request-id" not in response.headers:
        return "no X-Request-ID header"
    return None


def seed_server(base_url: str) -> Known:
    """A catalog, a paused session, a finished one, and a run state to mutate. Set-up, not a
    fuzzed answer: a fresh server's first session builds the catalog's router (loading the
    embedding model, 8 s or more on a busy 2-core box), so the timeout here is generous."""
    with httpx.Client(base_url=base_url, timeout=SEED_TIMEOUT_S) as client:
        r = client.post("/v1/catalogs", json=SEED_CATALOG)
        r.raise_for_status()
        catalog_id = r.json()["id"]
        ids = []
        for task in ("job=F1 amount=5 plan: pay send", "job=F2 amount=1 plan: help"):
            created = client.post("/v1/sessions", json={"catalog": catalog_id, "task": task})
            created.raise_for_status()
            ids.append(created.json()["id"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
                client.get(f"/v1/sessions/{sid}").json()["status"] == "running" for sid in ids):
            time.sleep(0.02)
        routed = client.post("/v1/route", json={"catalog": catalog_id, "query": "send 5",
                                                "include_state": True})
        routed.raise_for_status()
    return Known(catalog_id=catalog_id, session_ids=ids, state=routed.json()["state"])


# -- schemathesis ---------------------------------------------------------------------------------
def run_schemathesis(base_url: str, known: Known, *, max_examples: int, stats: FuzzStats,
                     seed: int = 0) -> None:
    """Every operation of the server's OpenAPI schema, positive and negative data, with path
    parameters drawn at random and from ids that exist."""
    import schemathesis
    from schemathesis import GenerationMode
    from schemathesis import checks as st_checks
    from schemathesis.core.result import Err

    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    checks = [st_checks.not_a_server_error, st_checks.status_code_conformance,
              st_checks.content_type_conformance, st_checks.response_schema_conformance]
    for result in schema.get_all_operations():
        if isinstance(result, Err):  # the server's own schema does not load: a failure
            stats.failures.append(f"invalid OpenAPI operation: {result.err()}")
            continue
        operation = result.ok()
        path_options: list[dict[str, Any] | None] = [None]
        names = [p.name for p in operation.path_parameters]
        if "session_id" in names:
            path_options += [{"session_id": sid} for sid in known.session_ids]
        if "catalog_id" in names:
            path_options.append({"catalog_id": known.catalog_id})
        for path_parameters in path_options:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                strategy = operation.as_strategy(generation_mode=mode,
                                                 path_parameters=path_parameters)
                run_cases(strategy, max_examples, seed, _schemathesis_case(
                    base_url, known, checks, stats, f"schemathesis-{mode.value}"))


def _schemathesis_case(base_url: str, known: Known, checks: list[Any], stats: FuzzStats,
                       phase: str) -> Callable[[Any], None]:
    def run(case: Any) -> None:
        if isinstance(case.body, dict) and "catalog" in case.body and \
                random.Random(repr(case.body)).random() < 0.5:
            case.body["catalog"] = known.catalog_id  # past the 404, into the real work
        started = time.perf_counter()
        response = case.call(base_url=base_url, timeout=MAX_SECONDS * 2)
        seconds = time.perf_counter() - started
        problem = None if response.status_code < 500 and seconds <= MAX_SECONDS else \
            f"{response.status_code} after {seconds:.1f} s: {response.text[:300]}"
        if problem is None:
            is_stream = "text/event-stream" in str(response.headers.get("content-type"))
            try:  # an SSE body is text: its schema describes the stream, not parsed events
                case.validate_response(response, checks=[
                    c for c in checks if not (is_stream and c.__name__ ==
                                              "response_schema_conformance")])
            except (Exception, BaseExceptionGroup) as e:  # schemathesis' FailureGroup
                problem = str(e).split("Reproduce with")[0].strip()[:600]
        stats.record(phase, case.method, case.formatted_path, None, seconds, problem)
        stats.statuses[response.status_code] += 1

    return run


def run_cases(strategy: Any, max_examples: int, seed: int,
               body: Callable[[Any], None]) -> None:
    @fixed_seed(seed)
    @settings(max_examples=max_examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(case=strategy)
    def run(case: Any) -> None:
        body(case)

    try:
        run()
    except Exception as e:  # e.g. Unsatisfiable: no negative data exists for this operation
        if type(e).__name__ != "Unsatisfiable":
            raise


# -- our own hostile requests ---------------------------------------------------------------------
HOSTILE_TEXT = st.one_of(
    st.text(max_size=40), st.sampled_from([
        "..", "../../etc/passwd", "%2e%2e%2f", "' OR 1=1 --", "\x00", "\u202e", "a" * 2_000,
        "{{7*7}}", "${jndi:ldap://x}", "DONE", "BACK", "\ud800"]))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | HOSTILE_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(HOSTILE_TEXT, inner,
                                                                max_size=4),
    max_leaves=12)
ROUTES = [
    ("POST", "/v1/route"), ("POST", "/v1/sessions"), ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/{sid}"), ("POST", "/v1/sessions/{sid}/approve"),
    ("POST", "/v1/sessions/{sid}/reject"), ("POST", "/v1/sessions/{sid}/cancel"),
    ("GET", "/v1/sessions/{sid}/trace"), ("GET", "/v1/sessions/{sid}/events"),
    ("POST", "/v1/catalogs"), ("GET", "/v1/catalogs"), ("GET", "/v1/catalogs/{cid}"),
    ("DELETE", "/v1/catalogs/{cid}"), ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"), ("GET", "/v1/models"), ("GET", "/v1/models/{mid}"),
    ("GET", "/metrics"), ("GET", "/healthz"), ("GET", "/readyz"), ("PUT", "/v1/route"),
    ("GET", "/nope"),
]


@st.composite
def mutated_state(draw: st.DrawFn, state: dict[str, Any]) -> dict[str, Any]:
    """A valid run state with a few fields replaced by hostile values, at any depth."""
    out: dict[str, Any] = json.loads(json.dumps(state))
    for _ in range(draw(st.integers(1, 3))):
        node: Any = out
        path = []
        while isinstance(node, dict | list) and node and draw(st.integers(0, 2)):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict)
                                       else list(range(len(node)))))
            path.append(key)
            parent, node = node, node[key]
        if path:
            parent[path[-1]] = draw(JSON_VALUES)
        else:
            out[draw(st.sampled_from(sorted(out)))] = draw(JSON_VALUES)
    return out


@st.composite
def hostile_request(draw: st.DrawFn, known: Known) -> dict[str, Any]:
    method, template = draw(st.sampled_from(ROUTES))
    ids = {"sid": draw(st.sampled_from(known.session_ids) | HOSTILE_TEXT),
           "cid": draw(st.just(known.catalog_id) | HOSTILE_TEXT),
           "mid": draw(HOSTILE_TEXT)}
    path = template.format(**{k: quote(v.encode("utf-8", "surrogatepass"), safe="")
                              for k, v in ids.items()})
    params = draw(st.dictionaries(st.sampled_from(
        ["limit", "offset", "status", "catalog", "include_state", "after", "format", "x"]),
        st.sampled_from(["-1", "0", "1001", "1e3", "99999999999999999999999", "done",
                         "running", "yes", "json", "yaml", "", "\x00"]) | HOSTILE_TEXT,
        max_size=3))
    headers = draw(st.dictionaries(st.sampled_from(
        ["content-type", "last-event-id", "x-request-id", "authorization", "accept"]),
        st.sampled_from(["application/json", "application/yaml", "text/plain",
                         "multipart/form-data", "application/json; charset=latin-1",
                         "-5", "99999999999999999999", "Bearer x", "x" * 8_000])
        | st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=50),
        max_size=3))
    kind = draw(st.integers(0, 9))
    if kind == 0:
        body: bytes | None = draw(st.sampled_from([
            b"[" * 100_000, b"\xff\xfe\x00", b'{"a": NaN}', b'{"a": 1, "a": 2}', b"",
            b"x" * 1_000_000, b'{"catalog": "' + b"a" * 100_000 + b'"}']))
    elif kind == 1 and template == "/v1/route":
        body = json.dumps({"catalog": known.catalog_id, "state": draw(
            mutated_state(known.state))}, allow_nan=True).encode("utf-8", "surrogatepass")
    elif kind in (2, 3):
        fields = {"catalog": draw(st.just(known.catalog_id) | HOSTILE_TEXT),
                  "task": draw(HOSTILE_TEXT), "query": draw(HOSTILE_TEXT),
                  "node": draw(st.sampled_from(["", "pay", "pay/send", "nope"]) | HOSTILE_TEXT),
                  "digest": draw(HOSTILE_TEXT), "flat": draw(JSON_VALUES),
                  "limits": draw(JSON_VALUES), "messages": draw(JSON_VALUES),
                  "model": draw(HOSTILE_TEXT), "prompt": draw(JSON_VALUES),
                  "max_tokens": draw(st.integers(-5, 10**12)), "stream": draw(JSON_VALUES),
                  "structured_outputs": draw(JSON_VALUES)}
        chosen = draw(st.lists(st.sampled_from(sorted(fields)), unique=True, max_size=5))
        body = json.dumps({k: fields[k] for k in chosen}, allow_nan=True).encode(
            "utf-8", "surrogatepass")
    elif kind == 4:
        body = None
    else:
        body = json.dumps(draw(JSON_VALUES), allow_nan=True).encode("utf-8", "surrogatepass")
    query = urlencode({k: v.encode("utf-8", "surrogatepass") for k, v in params.items()})
    return {"method": method, "url": f"{path}?{query}" if query else path, "headers": headers,
            "content": body}


def run_hostile_requests(base_url: str, known: Known, *, max_examples: int,
                         stats: FuzzStats, seed: int = 0) -> None:
    with httpx.Client(base_url=base_url, timeout=MAX_SECONDS * 2) as client:
        def one(request: dict[str, Any]) -> None:
            started = time.perf_counter()
            try:
                response = client.request(**request)
            except httpx.TransportError as e:
                stats.record("hostile", request["method"], request["url"], None,
                             time.perf_counter() - started, f"no answer: {e!r}")
                return
            seconds = time.perf_counter() - started
            stats.record("hostile", request["method"], request["url"], response, seconds,
                         answer_problem(response, seconds))

        run_cases(hostile_request(known), max_examples, seed, one)
        health = client.get("/healthz")
        if health.status_code != 200:
            stats.failures.append(f"the server is unhealthy after the hostile requests: "
                                  f"{health.status_code}")
