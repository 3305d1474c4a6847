"""The demo's exporter lives and dies with the evaluator that started it.

``python -m gpu_health.evaluator.demo.guard PARENT_PID FOLDER LOG -- ARGV...`` starts ``ARGV``
(the exporter) in its own process group with its output in ``LOG``, and ends it, then removes
``FOLDER`` (the demo's temporary folder: the fake tool's state file, the exporter's log), when
any of these happens: the evaluator ``PARENT_PID`` is gone however it ended (Ctrl-C, SIGTERM,
SIGHUP, SIGKILL: a killed process runs no cleanup of its own, so this separate process does it),
the guard itself gets SIGTERM, SIGINT or SIGHUP, or the exporter exits. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Final

POLL_S: Final = 0.5  # how soon a vanished evaluator is noticed
STOP_S: Final = 10.0  # SIGTERM, then SIGKILL after this long


def _parent_alive(pid: int) -> bool:
    """The evaluator still runs and is still our parent (a dead parent's orphans are adopted by
    init or a subreaper, so the parent pid changes even when the pid itself is reused)."""
    return os.getppid() == pid


def _end(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(STOP_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(STOP_S)


def guard(parent: int, folder: Path, log: Path, argv: list[str]) -> int:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    child: subprocess.Popen[bytes] | None = None
    try:
        if _parent_alive(parent):
            with log.open("ab") as out:
                child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            while not stop.wait(POLL_S) and _parent_alive(parent) and child.poll() is None:
                pass
    finally:
        if child is not None:
            _end(child)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print("usage: guard PARENT_PID FOLDER LOG -- ARGV...", file=sys.stderr)
        return 2
    return guard(int(argv[0]), Path(argv[1]), Path(argv[2]), argv[4:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
