"""Shared by the fake vendor tools in this folder (stdlib only; see README.md).

Every fake replays captured output and can act out one failure mode, chosen per invocation by
``<PREFIX>_MODE`` (or the contents of the file named by ``<PREFIX>_MODE_FILE``, so a test can
change a running exporter's tool between ticks). ``<PREFIX>_LOG`` names a file that gets one
JSON line per invocation with the argv, so tests can count processes per tick.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HUGE_BYTES = 50 * 1024 * 1024


def fixture(env_var: str, default_name: str) -> Path:
    """The capture named by ``env_var``, else the project's own fixture ``default_name``."""
    return Path(os.environ.get(env_var) or FIXTURES / default_name)


def mode(prefix: str) -> str:
    mode_file = os.environ.get(f"{prefix}_MODE_FILE")
    if mode_file and Path(mode_file).is_file():
        return Path(mode_file).read_text().strip() or "ok"
    return os.environ.get(f"{prefix}_MODE", "ok")


def log_invocation(prefix: str, **extra: object) -> None:
    log = os.environ.get(f"{prefix}_LOG")
    if log:
        with Path(log).open("a") as fh:
            fh.write(json.dumps({"argv": sys.argv[1:], "pid": os.getpid(), **extra}) + "\n")


def has_mode(prefix: str) -> bool:
    return bool(os.environ.get(f"{prefix}_MODE") or os.environ.get(f"{prefix}_MODE_FILE"))


def serve(prefix: str, routes: dict[tuple[str, ...], tuple[str, str]]) -> NoReturn:
    """Answer the argv in ``routes`` with its capture: ``{argv: (env var, default fixture)}``.

    The capture's own ``<env var>_MODE`` (or ``_MODE_FILE``) overrides ``<prefix>_MODE`` for
    that invocation, so one command of a tool can fail while another works.
    """
    log_invocation(prefix)
    args = tuple(sys.argv[1:])
    if args not in routes:
        fail(f"only {[list(r) for r in routes]} are faked, got {list(args)}", 64)
    env_var, default = routes[args]
    text = fixture(env_var, default).read_text()
    emit(mode(env_var) if has_mode(env_var) else mode(prefix), text)


def fail(message: str, status: int) -> NoReturn:
    """A failure of the fake itself (bad test setup), loud and distinct from tool behaviour."""
    sys.stderr.write(f"fake tool: {message}\n")
    sys.exit(status)


def emit(current_mode: str, output: str) -> NoReturn:
    """Print ``output`` the way ``current_mode`` says, then exit."""
    if current_mode == "ok":
        _write(output.encode())
        sys.exit(0)
    if current_mode == "empty":
        sys.exit(0)
    if current_mode == "hang":
        _hang()
    if current_mode == "huge":
        _huge()
    if current_mode == "garbage":
        _write(bytes(range(256)) * 64)
        sys.exit(0)
    if current_mode == "truncated":
        body = output.rstrip("\n")
        _write(body[: len(body) - max(1, len(body.splitlines()[-1]) * 2 // 5)].encode())
        sys.exit(0)
    if current_mode.startswith("exit:"):
        sys.stderr.write("fake tool: failing on purpose\n")
        sys.exit(int(current_mode.split(":", 1)[1]))
    fail(f"unknown mode {current_mode!r}", 97)


def _write(data: bytes) -> None:
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    except BrokenPipeError:  # the exporter stopped reading (size cap): that is the point
        os._exit(0)


def _hang() -> NoReturn:
    # A grandchild holding stdout open proves the exporter kills the whole process group: if it
    # only killed this process, the pipe would stay open until the grandchild exits.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    pidfile = os.environ.get("FAKE_PIDFILE")
    if pidfile:
        Path(pidfile).write_text(f"{os.getpid()} {child.pid}\n")
    time.sleep(3600)
    sys.exit(0)


def _huge() -> NoReturn:
    chunk = b"0, " * (1024 * 1024 // 3) + b"\n"
    written = 0
    while written < HUGE_BYTES:
        _write(chunk)
        written += len(chunk)
    sys.exit(0)
