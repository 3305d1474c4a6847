"""A throwaway PostgreSQL cluster for tests: Debian's server binaries, ``initdb`` + ``pg_ctl`` in
a temporary folder, listening on 127.0.0.1 only, password (SCRAM) authentication over TCP.

CI runs as root and PostgreSQL refuses to run as root, so the cluster then belongs to the
unprivileged ``nobody`` (its folder is made theirs, the commands run through ``runuser``).
Each test gets a database of its own (:meth:`PostgresServer.new_database`). ``.ci/run`` installs
the ``postgresql`` package; where the binaries are missing the callers skip with that reason.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

USER = "gpuhealth"
PASSWORD = "pg-test-secret-do-not-log"
_COUNTER = itertools.count()


def bindir() -> Path | None:
    """Where Debian's server binaries are (``/usr/lib/postgresql/<major>/bin``), newest first."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                   key=lambda p: int(p.parent.parent.name), reverse=True)
    if found:
        return found[0].parent
    which = shutil.which("pg_ctl")
    return Path(which).resolve().parent if which else None


def require_postgres() -> Path:
    where = bindir()
    if where is None:
        pytest.skip("PostgreSQL server binaries not installed (Debian package postgresql; "
                    ".ci/run installs it)")
    return where


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PostgresServer:
    """One cluster: ``start()``, ``new_database()``, ``url()``, ``stop()``; ``pause``/``resume``
    (SIGSTOP/SIGCONT of the postmaster) and ``stop``/``start`` again for outage tests."""

    def __init__(self, bin_dir: Path, root: Path,
                 settings: Mapping[str, str] | None = None) -> None:
        self.bin = bin_dir
        self.root = root
        self.settings = dict(settings or {})  # extra server settings (bench: shared_buffers)
        self.data = root / "data"
        self.port = _free_port()
        self.databases: dict[str, str] = {}  # database(key) -> name
        self._as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run the cluster as nobody
            self._as_user = ["runuser", "-u", "nobody", "--"]

    def _run(self, argv: Sequence[str]) -> None:
        done = subprocess.run([*self._as_user, *argv], capture_output=True, text=True,
                              timeout=120, check=False, env={**os.environ, "LC_ALL": "C"})
        if done.returncode != 0:
            raise AssertionError(f"{argv[0]} failed: {done.stdout}{done.stderr}")

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._as_user:
            shutil.chown(self.root, "nobody")
            shutil.chown(pwfile, "nobody")
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", USER,
                   "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}",
                   "-E", "UTF8", "--locale=C", "--no-sync"])

    def start(self) -> None:
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c unix_socket_directories={self.root} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                # who did what, for tests that read the log (log_statement is set per database)
                "-c log_line_prefix=%m@%a@%d@")
        opts += "".join(f" -c {name}={value}" for name, value in self.settings.items())
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                   str(self.root / "log"), "-o", opts, "-w", "-t", "60", "start"])

    def stop(self, mode: str = "fast") -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def url(self, database: str = "postgres", *, password: bool = True) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as con:
            con.execute(statement)

    def database(self, key: str) -> str:
        """The database known by ``key`` (a test's store name), created on first use."""
        if key not in self.databases:
            self.databases[key] = self.new_database()
        return self.databases[key]

    def new_database(self) -> str:
        name = f"t{os.getpid()}_{next(_COUNTER)}"
        self.sql(f"CREATE DATABASE {name} TEMPLATE template0")
        return name

    def log_lines(self) -> list[str]:
        with suppress(OSError):
            return (self.root / "log").read_text(errors="replace").splitlines()
        return []

    def log(self) -> str:
        with suppress(OSError):
            return (self.root / "log").read_text()[-4000:]
        return ""


@contextmanager
def postgres_server(settings: Mapping[str, str] | None = None) -> Iterator[PostgresServer]:
    """A started cluster, removed afterwards; ``settings``: extra ``-c name=value``."""
    bin_dir = require_postgres()
    with tempfile.TemporaryDirectory(prefix="gpu-health-pg-") as tmp:
        Path(tmp).chmod(0o755)
        server = PostgresServer(bin_dir, Path(tmp) / "pg", settings)
        server.init()
        server.start()
        try:
            yield server
        finally:
            with suppress(AssertionError):
                server.stop("immediate")
