"""Real MCP servers for the gateway's tests: `examples/mcp/catalog_server.py` processes over
Seal-Tools fields, two over stdio and one over streamable HTTP, each recording its calls."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_SERVER = REPO_ROOT / "examples" / "mcp" / "catalog_server.py"
ENV = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
       "STACKROUTE_CACHE_DIR": os.environ.get("STACKROUTE_CACHE_DIR", "")}
# The servers in order: the second (Finance) is the one the routing test must reach.
LAW_SENSITIVE = "getLawsuitStatus"  # marked destructive by its server: the gateway gates it


def seal_catalog(shared_data: Path) -> Path:
    return shared_data / "seal-tools" / "seal-tools.catalog.json"


def stdio_spec(catalog: Path, field: str, calls: Path, *extra: str) -> dict[str, Any]:
    return {"command": sys.executable,
            "args": [str(EXAMPLE_SERVER), "--catalog", str(catalog), "--field", field,
                     "--calls", str(calls), *extra]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(catalog: Path, field: str, calls: Path, *extra: str) -> Iterator[str]:
    """An example server on streamable HTTP in its own process; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE_SERVER), "--catalog", str(catalog), "--field", field,
         "--calls", str(calls), "--transport", "http", "--port", str(port), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP MCP server did not start: "
                                       + (process.stderr.read().decode() if process.stderr
                                          else "")) from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def servers_config(catalog: Path, calls_dir: Path, finance_url: str) -> dict[str, Any]:
    """Law (stdio, one tool gated), Finance (streamable HTTP), Sports (stdio)."""
    return {"Law": stdio_spec(catalog, "Law", calls_dir / "law.jsonl",
                              "--sensitive", LAW_SENSITIVE),
            "Finance": {"url": finance_url},
            "Sports": stdio_spec(catalog, "Sports", calls_dir / "sports.jsonl",
                                 "--slow", "getBasketballScore", "--slow-s", "20")}


def recorded_calls(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for_calls(path: Path, num: int, *, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        calls = recorded_calls(path)
        if len(calls) >= num or time.monotonic() > deadline:
            return calls
        time.sleep(0.05)


Elicitor = Callable[[str, dict[str, Any]], tuple[str, dict[str, Any] | None]]


class GatewayClient:
    """The MCP SDK's own client, connected to a `stackroute mcp` process over stdio, held open
    on a private loop so synchronous tests can share one gateway. `answer_elicitation`: None
    declares no elicitation support; True/False accepts with approve=that. `elicitor` (instead)
    answers each elicitation from its message and requested schema with (action, content)."""

    def __init__(self, args: list[str], *, answer_elicitation: bool | None = None,
                 elicitor: Elicitor | None = None) -> None:
        import asyncio

        from stackroute.server.engines.loop_thread import LoopThread

        self.args = args
        self.answer_elicitation = answer_elicitation
        self.elicitor = elicitor
        self.elicited: list[str] = []
        self.requested_schemas: list[dict[str, Any]] = []
        self._loop = LoopThread(name="mcp-test-client")
        self._stop = asyncio.Event()
        self._session: Any = None
        self._ready = self._loop.call(self._start(), timeout_s=600)

    async def _start(self) -> bool:
        import asyncio

        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._task = asyncio.get_running_loop().create_task(self._hold(ready))
        await ready
        return True

    async def _hold(self, ready: Any) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client
        from mcp.types import ElicitResult

        async def elicit(context: Any, params: Any) -> Any:
            self.elicited.append(params.message)
            self.requested_schemas.append(dict(params.requested_schema))
            if self.elicitor is not None:
                action, content = self.elicitor(params.message, dict(params.requested_schema))
                return ElicitResult(action=action, content=content)
            return ElicitResult(action="accept",
                                content={"approve": bool(self.answer_elicitation)})

        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "stackroute.server.cli", *self.args],
                                       env={**ENV, "PATH": os.environ.get("PATH", "")},
                                       cwd=str(REPO_ROOT))
        try:
            async with stdio_client(params) as (read, write), ClientSession(
                    read, write, read_timeout_seconds=600,
                    elicitation_callback=None if self.answer_elicitation is None
                    and self.elicitor is None else elicit) as session:
                await session.initialize()
                self._session = session
                ready.set_result(True)
                await self._stop.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e)
            elif not isinstance(e, Exception):
                raise

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's structured result; an `isError` answer raises `RuntimeError`."""
        result = self._loop.call(self._session.call_tool(tool, arguments), timeout_s=600)
        if result.is_error:
            raise RuntimeError(" ".join(getattr(c, "text", "") for c in result.content))
        return dict(result.structured_content or {})

    def tool_names(self) -> list[str]:
        listed = self._loop.call(self._session.list_tools(), timeout_s=60)
        return [t.name for t in listed.tools]

    def close(self) -> None:
        import contextlib

        self._loop._loop.call_soon_threadsafe(self._stop.set)
        with contextlib.suppress(Exception):
            self._loop.call(_wait_task(self._task), timeout_s=30)
        self._loop.stop()
        self._loop.close()


async def _wait_task(task: Any) -> None:
    import asyncio

    await asyncio.wait([task], timeout=25)
