"""A throwaway PostgreSQL cluster in a temp folder, for tests and benchmarks.

    with PgCluster.start() as cluster:       # initdb + pg_ctl start, on a free loopback port
        url = cluster.create_database("t1")  # postgresql://postgres@127.0.0.1:PORT/t1
    # stopped (pg_ctl -m immediate) and its folder removed

It uses the Debian `postgresql` package's binaries (`/usr/lib/postgresql/N/bin`, newest N)
or whatever `initdb` is on PATH. PostgreSQL refuses to run as root, so when this process is
root the cluster's folder is given to `nobody` and the binaries run through `runuser -u
nobody` (or `setpriv` where runuser is missing); as a normal user they run directly. The
server listens on 127.0.0.1 only, with trust authentication: it is for throwaway test data.

`is_durable=False` (tests) turns fsync off; benchmarks that compare stores keep it on, since
the SQLite store fsyncs every commit.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "postgres"
RUN_AS = "nobody"  # when started as root


class PgClusterError(RuntimeError):
    """The binaries are missing or the cluster did not start; says which and why."""


def find_bindir() -> Path | None:
    """The folder with `initdb` and `pg_ctl`, or None when PostgreSQL is not installed."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(Path(p).parent.parent.name)
                      if Path(p).parent.parent.name.isdigit() else 0)
    if versions:
        return Path(versions[-1]).parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgCluster:
    bindir: Path
    folder: Path
    port: int
    is_root: bool
    _options: str = ""  # the server's command-line settings, kept for `restart`

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    @classmethod
    def start(cls, *, is_durable: bool = False, bindir: Path | None = None) -> PgCluster:
        bindir = bindir or find_bindir()
        if bindir is None:
            raise PgClusterError("PostgreSQL binaries not found (no /usr/lib/postgresql/*/bin/"
                                 "initdb, no initdb on PATH): apt-get install postgresql")
        is_root = os.geteuid() == 0
        folder = Path(tempfile.mkdtemp(prefix="stackroute-pg-"))
        cluster = cls(bindir=bindir, folder=folder, port=_free_port(), is_root=is_root)
        if is_root:
            folder.chmod(0o755)
            shutil.chown(folder, user=RUN_AS)
        try:
            cluster._run(["initdb", "-D", str(cluster.data), "-U", SUPERUSER, "--auth=trust",
                          "-E", "UTF8", "--no-sync", "--no-instructions"])
            options = (f"-p {cluster.port} -c listen_addresses=127.0.0.1 "
                       f"-k {folder} -c max_connections=200")
            if not is_durable:
                options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            cluster._options = options
            cluster._run(["pg_ctl", "-D", str(cluster.data), "-o", options, "-l",
                          str(folder / "postgres.log"), "-w", "-t", "60", "start"])
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def restart(self, *, down_s: float = 0.0) -> None:
        """Crash the server (`-m immediate`: no checkpoint, connections cut as a lost machine
        would cut them), leave it down for `down_s` (clients cannot connect), and start it
        again on the same port; it recovers from its WAL."""
        self._run(["pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop"])
        time.sleep(down_s)
        self._run(["pg_ctl", "-D", str(self.data), "-o", self._options, "-l",
                   str(self.folder / "postgres.log"), "-w", "-t", "60", "start"])

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            # removing the folder below is what matters if this fails
            with contextlib.suppress(PgClusterError):
                self._run(["pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(self.folder, ignore_errors=True)

    def log_tail(self, num_chars: int = 3000) -> str:
        try:
            return (self.folder / "postgres.log").read_text(errors="replace")[-num_chars:]
        except OSError:
            return ""

    def _run(self, argv: Sequence[str]) -> None:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        if self.is_root:
            command = (["runuser", "-u", RUN_AS, "--", *command] if shutil.which("runuser")
                       else ["setpriv", "--reuid", RUN_AS, "--regid", "nogroup",
                             "--clear-groups", *command])
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.folder,
                              timeout=120, check=False)
        if done.returncode != 0:
            raise PgClusterError(f"{' '.join(argv[:1])} failed ({done.returncode}): "
                                 f"{done.stderr.strip() or done.stdout.strip()}\n"
                                 f"{self.log_tail()}")


@contextmanager
def running_cluster(*, is_durable: bool = False) -> Iterator[PgCluster]:
    cluster = PgCluster.start(is_durable=is_durable)
    try:
        yield cluster
    finally:
        cluster.stop()
