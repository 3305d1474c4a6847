"""Process plumbing for the end-to-end test: free ports, subprocesses in their own process group
(killed with all their children at teardown), bounded HTTP polling, and the Alertmanager webhook
receiver (a small aiohttp server on 127.0.0.1 running in a background thread).

Nothing here sleeps to wait for time: every wait polls a condition until a deadline and fails
with the logs of every process when the deadline passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")
POLL_S = 0.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Proc:
    """A subprocess with its log file; ``stop`` kills its whole process group."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        # Leftovers of the group (e.g. a fake vendor tool in the middle of a run).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout)


@dataclass
class Procs:
    """Every process the test started, stopped in reverse order."""

    folder: Path
    items: list[Proc] = field(default_factory=list)

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> Proc:
        log = self.folder / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True)
        proc = Proc(name, popen, log)
        self.items.append(proc)
        return proc

    def logs(self) -> str:
        return "\n\n".join(f"--- {p.name} (exit {p.popen.poll()}) ---\n{p.tail()}"
                           for p in self.items)

    def stop_all(self) -> None:
        for proc in reversed(self.items):
            proc.stop()

    def check_alive(self) -> None:
        dead = [p for p in self.items if p.popen.poll() is not None]
        if dead:
            raise AssertionError(f"{', '.join(p.name for p in dead)} exited early\n{self.logs()}")


def http(method: str, url: str, body: object = None, headers: Mapping[str, str] | None = None,
         timeout: float = 5.0) -> tuple[int, Any]:
    """One request; (status, parsed JSON or text). Connection errors give status 0."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw, status = response.read(), response.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def wait_for(what: str, probe: Callable[[], T | None], deadline_s: float, procs: Procs) -> T:
    """Poll ``probe`` until it returns something truthy; fail with every log at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        value = probe()
        if value:
            return value
        procs.check_alive()
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s:g}s waiting for {what}\n"
                                 f"{procs.logs()}")
        time.sleep(POLL_S)  # a short poll interval, not a wait for time to pass


class ThreadedServer:
    """aiohttp applications on 127.0.0.1, served from a background thread: ``sites`` lists
    which application listens on which port; ``start`` returns once all of them listen."""

    def __init__(self, name: str, sites: list[tuple[web.Application, int]]) -> None:
        self.name = name
        self.sites = sites
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    async def _serve(self) -> None:
        runners = []
        for app, port in self.sites:
            runner = web.AppRunner(app, handle_signals=False, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            runners.append(runner)
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        for runner in runners:
            await runner.cleanup()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise AssertionError(f"{self.name} did not start")

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


class Webhook(ThreadedServer):
    """Alertmanager's webhook receiver: records every notification it is sent."""

    def __init__(self) -> None:
        self.port = free_port()
        self.notifications: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        super().__init__("webhook receiver", [(app, self.port)])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.notifications)

    async def _hook(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.notifications.append(body)
        return web.Response(text="ok")
