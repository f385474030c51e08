"""Token streaming without a model: the safe-delta assembler (tables), the thread-to-loop
bridge, and the OpenAI endpoints on real uvicorn over an engine double that produces its answer
only as the test lets it — so a chunk that reaches the client while the engine is still held
proves the answer is streamed, not buffered. The sessions' event stream is proved the same way:
a transition arrives while the session's next step is held."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from doubles import PlanEngine, RecordingEngine
from live_server import serve, server_settings
from routing_app_kit import make_app, make_settings
from session_kit import BANK_CATALOG
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    Constraint,
    ContextOverflowError,
    DeltaSink,
    EngineError,
    EngineInfo,
    Generation,
    MenuResult,
    PromptInput,
    SamplingOptions,
    TextDelta,
)
from stackroute.server.engines.streaming import TextAssembler
from stackroute.server.http.app import create_app
from stackroute.server.http.engine_stream import Finished, StreamClosedError, stream_call
from stackroute.server.service.engine_queue import EngineQueue

WAIT_S = 30.0


# -- the assembler ---------------------------------------------------------------------------
@pytest.mark.parametrize(("pushes", "final", "stop", "expected"), [
    (["He", "Hello", "Hello, w"], "Hello, world", (), ["He", "llo", ", w", "orld"]),
    # a half character (U+FFFD) is never sent; the whole one is
    (["caf\ufffd", "café!"], "café!", (), ["caf", "é!"]),
    # a tail that could become the stop string waits; text at and past it never goes out
    (["a\n", "a\nb", "a\n\nzzz"], "a\nb", ("\n\n",), ["a", "\nb"]),
    (["x END", "x ENDzzz"], "x ", ("END",), ["x "]),
    (["ab", "abc"], "abc", ("cd",), ["ab", "c"]),
    # nothing pushed (a choice decided in one pass): the final text as one delta
    ([], "yes", (), ["yes"]),
    ([], "", (), []),
])
def test_the_deltas_are_safe_and_join_to_the_answer(
        pushes: list[str], final: str, stop: tuple[str, ...], expected: list[str]) -> None:
    sent: list[TextDelta] = []
    assembler = TextAssembler(sent.append, stop=stop)
    for text in pushes:
        assembler.push(text)
    assembler.finish(final)
    assert [d.text for d in sent] == expected
    assert "".join(d.text for d in sent) == final


# -- the bridge ------------------------------------------------------------------------------
def test_items_arrive_while_the_call_still_runs() -> None:
    """The call waits for the consumer to have seen its first item before it sends the
    second: a bridge that buffered until the call ended would time out here."""
    seen_first = threading.Event()

    def call(send: Any) -> str:
        send("a")
        if not seen_first.wait(WAIT_S):
            raise TimeoutError("the first item never reached the consumer")
        send("b")
        return "done"

    async def consume() -> list[Any]:
        got = []
        async for item in stream_call(EngineQueue(max_queue=1, max_concurrency=1), call):
            got.append(item)
            seen_first.set()
        return got

    assert asyncio.run(consume()) == ["a", "b", Finished("done")]


def test_a_consumer_that_stops_stops_the_call() -> None:
    stopped = threading.Event()
    num_sent = 0

    def call(send: Any) -> None:
        nonlocal num_sent
        try:
            for n in range(1000):
                send(n)
                num_sent += 1
                time.sleep(0.005)
        except StreamClosedError:
            stopped.set()
            raise

    async def consume_one() -> None:
        stream = stream_call(EngineQueue(max_queue=1, max_concurrency=1), call)
        assert await anext(stream) == 0
        await stream.aclose()
        await asyncio.sleep(0)

    asyncio.run(consume_one())
    assert stopped.wait(WAIT_S) and num_sent < 1000


def test_an_error_in_the_call_comes_out_of_the_stream() -> None:
    def call(send: Any) -> None:
        send(1)
        raise ContextOverflowError("too long")

    async def consume() -> list[Any]:
        got = []
        with pytest.raises(ContextOverflowError, match="too long"):
            async for item in stream_call(EngineQueue(max_queue=1, max_concurrency=1), call):
                got.append(item)
        return got

    assert asyncio.run(consume()) == [1]


# -- the OpenAI endpoints over a held engine -------------------------------------------------
class DripEngine(RecordingEngine):
    """Streams `pieces` one by one; before each piece after the first it waits for `step`
    (the test sets it once it has seen the previous chunk). `fail_after`: raise an
    EngineError after that many pieces; `error_first`: raise it before any piece. Records
    whether a stopped client stopped it (`was_stopped`)."""

    info = EngineInfo(engine="drip", model="drip-model", max_context_tokens=512)

    def __init__(self, pieces: Sequence[str] = ("Hel", "lo", " world")) -> None:
        super().__init__()
        self.pieces = tuple(pieces)
        self.step = threading.Semaphore(0)
        self.fail_after: int | None = None
        self.error_first: Exception | None = None
        self.was_stopped = threading.Event()
        self.constraints: list[Constraint | None] = []
        self.num_sent = 0

    def generate_stream(self, prompt: PromptInput, *, on_delta: DeltaSink,
                        constraint: Constraint | None = None,
                        sampling: SamplingOptions | None = None) -> Generation:
        self.constraints.append(constraint)
        if self.error_first is not None:
            raise self.error_first
        try:
            for n, piece in enumerate(self.pieces):
                if n and not self.step.acquire(timeout=WAIT_S):
                    raise TimeoutError("the test never let the engine go on")
                if self.fail_after is not None and n == self.fail_after:
                    raise EngineError("the engine broke mid-answer")
                on_delta(TextDelta(piece))
                self.num_sent += 1
        except StreamClosedError:
            self.was_stopped.set()
            raise
        return Generation(text="".join(self.pieces), finish_reason="stop",
                          usage=Usage(model_calls=1, prompt_tokens=4,
                                      generated_tokens=len(self.pieces)))


def events_of(response: httpx.Response) -> Iterator[Any]:
    """The `data:` payloads of an SSE response, as they arrive (JSON decoded but `[DONE]`)."""
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line.removeprefix("data: ")
            yield data if data == "[DONE]" else json.loads(data)


@pytest.fixture
def drip(tmp_path: Path) -> Iterator[tuple[DripEngine, str]]:
    engine = DripEngine()
    with serve(create_app(server_settings(tmp_path), engine=engine)) as base_url:
        yield engine, base_url


CHAT = {"messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_chat_chunks_arrive_as_the_engine_produces_them(
        drip: tuple[DripEngine, str]) -> None:
    engine, base_url = drip
    body = {**CHAT, "stream_options": {"include_usage": True},
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "x", "schema": {"type": "object"}}}}
    contents: list[str] = []
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body,
                      timeout=WAIT_S) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = events_of(r)
        role = next(events)
        assert role["object"] == "chat.completion.chunk"
        assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        for event in events:
            if event == "[DONE]":
                break
            choice = (event["choices"] or [None])[0]
            if choice is not None and choice["delta"].get("content"):
                contents.append(choice["delta"]["content"])
                engine.step.release()  # the engine holds the next piece until now
            elif choice is not None:
                assert choice["finish_reason"] == "stop"
            else:
                assert event["usage"]["completion_tokens"] == 3
    assert contents == ["Hel", "lo", " world"]
    constraint = engine.constraints[0]
    assert constraint is not None and constraint.kind.value == "json"  # response_format streams


def test_completions_stream_each_prompt_under_its_index(drip: tuple[DripEngine, str]) -> None:
    engine, base_url = drip
    body = {"prompt": ["a", "b"], "max_tokens": 8, "stream": True,
            "structured_outputs": {"regex": "[a-z ]+"}}
    pieces: list[tuple[int, str, str | None]] = []
    with httpx.stream("POST", f"{base_url}/v1/completions", json=body, timeout=WAIT_S) as r:
        assert r.status_code == 200
        for event in events_of(r):
            if event == "[DONE]":
                break
            (choice,) = event["choices"]
            assert event["object"] == "text_completion"
            pieces.append((choice["index"], choice["text"], choice["finish_reason"]))
            if choice["text"]:
                engine.step.release()
    assert pieces == [(0, "Hel", None), (0, "lo", None), (0, " world", None), (0, "", "stop"),
                      (1, "Hel", None), (1, "lo", None), (1, " world", None), (1, "", "stop")]


def test_an_error_before_the_first_piece_is_an_http_error(
        drip: tuple[DripEngine, str]) -> None:
    engine, base_url = drip
    engine.error_first = ContextOverflowError("prompt needs 9000 tokens")
    r = httpx.post(f"{base_url}/v1/chat/completions", json=CHAT, timeout=WAIT_S)
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["code"] == "context_overflow"


def test_an_error_after_the_first_piece_is_an_error_event(
        drip: tuple[DripEngine, str]) -> None:
    engine, base_url = drip
    engine.fail_after = 1
    engine.step.release()
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=CHAT,
                      timeout=WAIT_S) as r:
        assert r.status_code == 200
        events = list(events_of(r))
    assert events[1]["choices"][0]["delta"] == {"content": "Hel"}
    assert events[-2]["error"]["code"] == "engine_error"
    assert "mid-answer" in events[-2]["error"]["message"]
    assert events[-1] == "[DONE]"


def test_a_client_that_goes_away_stops_the_generation(drip: tuple[DripEngine, str]) -> None:
    engine, base_url = drip
    engine.pieces = tuple(f"w{n} " for n in range(200))
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=CHAT,
                      timeout=WAIT_S) as r:
        events = events_of(r)
        next(events)  # the role
        assert next(events)["choices"][0]["delta"] == {"content": "w0 "}
    # The connection is closed. Let the engine go on piece by piece: once the server has
    # seen the client go, the next piece finds nobody reading and stops the engine.
    deadline = time.monotonic() + WAIT_S
    while not engine.was_stopped.wait(0.05) and time.monotonic() < deadline:
        engine.step.release()
    assert engine.was_stopped.is_set()
    assert engine.num_sent < len(engine.pieces)  # it never ran to the end


# -- the sessions' event stream ----------------------------------------------------------------
class SteppedPlanEngine(PlanEngine):
    """A PlanEngine whose every routing menu choice waits for a permit from `steps` (a value
    menu, routing/arguments, is part of the route step that chose the leaf: not held)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.steps = threading.Semaphore(0)

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Any = None) -> MenuResult:
        is_value_menu = "copied from the request" in prompt.messages[-1].content
        if not is_value_menu and not self.steps.acquire(timeout=WAIT_S):
            raise TimeoutError("the test never allowed this step")
        return super().choose(prompt, options, option_bias=option_bias)


def test_session_transitions_are_sent_as_they_happen(tmp_path: Path) -> None:
    engine = SteppedPlanEngine(("weather",), {"weather": {"city": "Paris"}})
    # every choose() here is a step the test permits; the catalog's warm-on-load (a choose in
    # the background) would take one of the session's permits, so it is off
    settings = make_settings(tmp_path, warm_on_load="off")
    with serve(make_app(settings, engine)) as base_url:
        catalog = httpx.post(f"{base_url}/v1/catalogs", json=BANK_CATALOG, timeout=WAIT_S)
        session = httpx.post(f"{base_url}/v1/sessions", timeout=WAIT_S, json={
            "catalog": catalog.json()["id"], "task": "weather in Paris"}).json()
        sid = session["id"]
        arrived: queue.Queue[dict[str, Any]] = queue.Queue()

        def read() -> None:
            with httpx.stream("GET", f"{base_url}/v1/sessions/{sid}/events",
                              timeout=WAIT_S) as r:
                event: dict[str, Any] = {}
                for line in r.iter_lines():
                    if line.startswith(("event:", "data:")):
                        key, _, value = line.partition(": ")
                        event[key.removesuffix(":")] = value
                    elif not line and event:
                        arrived.put(event)
                        event = {}

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def next_event() -> dict[str, Any]:
            event = arrived.get(timeout=WAIT_S)
            return {"event": event["event"], "data": json.loads(event["data"])}

        first = next_event()  # the start, saved at creation; no step has run
        assert first["event"] == "transition" and first["data"]["kind"] == "start"
        with pytest.raises(queue.Empty):
            arrived.get(timeout=0.5)  # nothing more while the first step is held
        engine.steps.release()  # one routing call: the root picks weather
        route = next_event()
        assert route["data"]["kind"] == "route" and route["data"]["decision"] == "weather"
        # the session is still running (its next routing call is held) and the stream has
        # already sent the transition: it did not wait for the end
        state = httpx.get(f"{base_url}/v1/sessions/{sid}", timeout=WAIT_S).json()
        assert state["status"] == "running"
        engine.steps.release(10)
        kinds = []
        while True:
            event = next_event()
            if event["event"] == "end":
                assert event["data"] == {"status": "done"}
                break
            kinds.append(event["data"]["kind"])
        assert "leaf_result" in kinds and kinds[-1] == "finish"
        reader.join(WAIT_S)


# -- the remote engine passes the upstream's stream through ----------------------------------
def test_the_remote_engine_streams_what_its_upstream_streams(
        drip: tuple[DripEngine, str], tmp_path: Path) -> None:
    """Our server over a RemoteEngine whose upstream is a stackroute server over the held
    engine: each piece reaches the end client while the upstream engine still holds the next."""
    from stackroute.server.engines.remote_engine import RemoteEngine

    upstream_engine, upstream = drip
    with RemoteEngine(base_url=upstream) as remote, \
            serve(create_app(server_settings(tmp_path), engine=remote)) as base_url:
        contents = []
        body = {**CHAT, "structured_outputs": {"regex": "[A-Za-z ]+"},
                "stream_options": {"include_usage": True}}
        usage = None
        with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body,
                          timeout=WAIT_S) as r:
            assert r.status_code == 200
            for event in events_of(r):
                if event == "[DONE]":
                    break
                if event["choices"] and event["choices"][0]["delta"].get("content"):
                    contents.append(event["choices"][0]["delta"]["content"])
                    upstream_engine.step.release()
                elif not event["choices"]:
                    usage = event["usage"]
        assert contents == ["Hel", "lo", " world"]
        assert usage is not None and usage["completion_tokens"] == 3
        constraint = upstream_engine.constraints[-1]
        assert constraint is not None and constraint.pattern == "[A-Za-z ]+"


def test_the_remote_engine_checks_a_streamed_answer_against_its_constraint(
        drip: tuple[DripEngine, str]) -> None:
    """An upstream that ignores the constraint is caught after the stream, as without it."""
    from stackroute.server.engines.remote_engine import RemoteEngine
    from stackroute.server.engines.remote_errors import RemoteFeatureError

    upstream_engine, upstream = drip
    upstream_engine.step.release(2)
    pieces: list[str] = []
    with RemoteEngine(base_url=upstream) as remote, \
            pytest.raises(RemoteFeatureError, match="ignored the regex constraint"):
        remote.generate_stream("x", on_delta=lambda d: pieces.append(d.text),
                               constraint=Constraint.regex("[0-9]+"))
    assert pieces == ["Hel", "lo", " world"]


@pytest.mark.parametrize("name", ["stackroute.server.engines.streaming",
                                  "stackroute.server.engines.trace_context"])
def test_doctests(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
