"""The remote engine takes the base URL users already have: the server's root or its `/v1`
(the OpenAI client's and vLLM's own convention), with or without a trailing slash, also behind
a path prefix; every connection error names the URL it tried. Real HTTP on loopback against
the fake upstream of `upstream_kit.py`."""

from __future__ import annotations

import socket

import pytest
from live_server import serve
from stackroute.runtime.errors import InputError
from stackroute.server.engines.remote_engine import (
    RemoteEngine,
    RemoteOptions,
    RemoteRejectedError,
    RemoteUnavailableError,
)
from stackroute.server.engines.remote_http import server_root
from upstream_kit import FAST_RETRY, OK, Script, fake_server

NO_RETRY = RemoteOptions(backoff_s=0.01, max_retries=1, timeout_s=10)


@pytest.mark.parametrize(("given", "root"), [
    ("http://host:8000", "http://host:8000"),
    ("http://host:8000/", "http://host:8000"),
    ("http://host:8000/v1", "http://host:8000"),
    ("http://host:8000/v1/", "http://host:8000"),
    ("https://gw.example/llm/v1", "https://gw.example/llm"),
    ("https://gw.example/llm", "https://gw.example/llm"),
    ("http://host:8000/v10", "http://host:8000/v10"),  # only a whole `v1` segment is dropped
])
def test_server_root(given: str, root: str) -> None:
    assert server_root(given) == root


@pytest.mark.parametrize("bad", ["localhost:8000", "host:8000/v1", "ftp://host/v1", "http://",
                                 "", "http://host:8000/v1?x=1"])
def test_a_base_url_that_is_not_an_http_url_is_refused(bad: str) -> None:
    with pytest.raises(InputError, match="base URL must be an http:// or https:// URL"):
        server_root(bad)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_both_forms_reach_the_same_server(suffix: str) -> None:
    chat = Script(OK)
    with serve(fake_server(chat)) as url, \
            RemoteEngine(base_url=url + suffix, options=FAST_RETRY) as remote:
        assert remote.info.model == "fake"
        assert remote.choose(_prompt(), ("a", "b")).choice == "a"
        assert len(chat.bodies) == 1


def test_a_refused_connection_names_the_url_tried() -> None:
    with socket.socket() as sock:  # a port nothing listens on once the socket closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RemoteUnavailableError,
                       match=rf"GET http://127\.0\.0\.1:{port}/v1/models: no answer after 2 "
                             r"attempt\(s\); last: ConnectError"):
        RemoteEngine(base_url=f"http://127.0.0.1:{port}/v1", options=NO_RETRY)


def test_a_404_names_the_url_tried_and_what_the_base_url_should_be() -> None:
    """A server that is there but serves no OpenAI API at that path (a wrong prefix)."""
    with serve(fake_server(Script(OK))) as url, pytest.raises(
            RemoteRejectedError,
            match=rf"GET {url}/wrong/v1/models: HTTP 404: .*is --base-url the server's "
                  r"address \(http://host:port or http://host:port/v1\)"):
        RemoteEngine(base_url=f"{url}/wrong/v1", options=NO_RETRY)


def _prompt():  # type: ignore[no-untyped-def]
    from stackroute.runtime.messages import Message
    from stackroute.runtime.prompt import Prompt

    return Prompt((Message("user", "pick a"),))
