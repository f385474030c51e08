"""`stackroute serve` as a child process on a free loopback port, for the reliability scripts.

    server = ServerProcess(["--config", "cfg.json", "--db", "s.db"], log_path=Path("serve.log"))
    server.start()            # waits for /readyz
    httpx.get(server.base_url + "/healthz")
    server.kill()             # SIGKILL: no shutdown code runs
    server.stop()             # SIGTERM, then SIGKILL after a grace period

The command is `python -m stackroute.server.cli serve …`, the same entry point as the
`stackroute` script, so the child uses this interpreter and its environment.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

HOST = "127.0.0.1"


class ServerStartError(RuntimeError):
    """The child did not become ready; the message ends with the tail of its log."""


def free_port() -> int:
    """A port that was free a moment ago (the child binds it; a race only costs a retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class ServerProcess:
    def __init__(self, args: Sequence[str], *, log_path: Path,
                 env: Mapping[str, str] | None = None, ready_timeout_s: float = 120.0) -> None:
        self.args = list(args)
        self.log_path = log_path
        self.env = {**os.environ, **(env or {})}
        self.ready_timeout_s = ready_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.num_starts = 0

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, *, max_tries: int = 3) -> float:
        """Start the child and wait until /readyz answers 200; return the seconds it took."""
        started = time.monotonic()
        for attempt in range(max_tries):
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                log.write(f"--- start {self.num_starts} on port {self.port}\n".encode())
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "stackroute.server.cli", "serve", "--host", HOST,
                     "--port", str(self.port), *self.args],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=self.env)
            self.num_starts += 1
            if self._wait_ready():
                return time.monotonic() - started
            self.kill()
            if attempt == max_tries - 1:
                break
        raise ServerStartError(f"stackroute serve did not become ready:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the child and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def stop(self, *, grace_s: float = 20.0) -> int | None:
        """SIGTERM (a graceful shutdown), SIGKILL after `grace_s`; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def log_tail(self, num_chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-num_chars:]
        except OSError:
            return ""

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.ready_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc is None or self.proc.poll() is not None:
                    return False
                try:
                    if client.get(f"{self.base_url}/readyz").status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        return False
