"""Real servers for the Prometheus-source tests: VictoriaMetrics (Debian ``victoria-metrics``)
loaded through its import API, Prometheus (Debian ``prometheus``) scraping stand-in exporters,
and a switch (a real HTTP proxy on 127.0.0.1) that can make the source answer 503 or refuse.

Nothing sleeps to wait for time: every wait polls a condition until a deadline.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import threading
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.e2e.stack import Procs, free_port, wait_for

VM = shutil.which("victoria-metrics")
PROMETHEUS = shutil.which("prometheus")
VM_MISSING = "victoria-metrics (Debian package 'victoria-metrics', installed by .ci/run) is missing"
PROMETHEUS_MISSING = "prometheus (Debian package 'prometheus', installed by .ci/run) is missing"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except OSError:
        return 0, ""


@contextmanager
def _server(folder: Path, name: str, argv: Callable[[int], list[str]],
            ready_path: str) -> Iterator[str]:
    """Start ``argv(port)`` on a free port, wait until ``ready_path`` answers 200, yield the
    base URL, stop the process group at the end."""
    procs = Procs(folder)
    port = free_port()
    procs.start(name, argv(port))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{name} {ready_path}", lambda: _get(url + ready_path)[0] == 200, 60, procs)
        yield url
    finally:
        procs.stop_all()


def victoria_metrics(folder: Path, *flags: str) -> AbstractContextManager[str]:
    """A throwaway VictoriaMetrics on a free port (with extra ``flags``); yields its base URL."""
    return _server(folder, "victoria-metrics", lambda port: [
        str(VM), f"-storageDataPath={folder / 'vm-data'}", f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y", "-search.disableCache", "-loggerLevel=ERROR", *flags],
        "/health")


def loaded_victoria_metrics(factory: Any, lines: Sequence[dict[str, Any]]) -> Iterator[str]:
    """A module fixture's body: a VictoriaMetrics loaded with ``lines``, its base URL yielded
    (``factory``: pytest's ``tmp_path_factory``)."""
    with victoria_metrics(factory.mktemp("vm")) as url:
        vm_import(url, lines)
        yield url


def vm_import(url: str, lines: Sequence[dict[str, Any]]) -> None:
    """POST JSON lines to /api/v1/import, then flush so that queries see them at once."""
    body = "\n".join(json.dumps(line) for line in lines).encode()
    request = urllib.request.Request(url + "/api/v1/import", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=120) as r:
        assert r.status == 204, r.status
    assert _get(url + "/internal/force_flush")[0] == 200


@dataclass
class Switch:
    """A reverse proxy to ``upstream``; ``mode`` "up" forwards, "503" answers an error,
    "down" closes the connection (a dead server), for outage tests. With ``authorization`` it
    answers 401 unless that exact header comes (an authenticating proxy in front of
    Prometheus); with ``tls`` it serves HTTPS."""

    upstream: str
    mode: str = "up"
    port: int = field(default_factory=free_port)
    requests: int = 0
    authorization: str | None = None
    tls: ssl.SSLContext | None = None
    seen_authorization: list[str | None] = field(default_factory=list)
    fail_requests: set[int] = field(default_factory=set)  # these request numbers answer 503
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stop: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        self.seen_authorization.append(request.headers.get("Authorization"))
        if self.authorization and request.headers.get("Authorization") != self.authorization:
            return web.Response(status=401, text="Unauthorized")
        if self.mode == "503" or self.requests in self.fail_requests:
            return web.Response(status=503, text="Service Unavailable")
        if self.mode == "down":
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        async with aiohttp.ClientSession() as s, s.get(self.upstream + request.path_qs) as r:
            return web.Response(status=r.status, body=await r.read(),
                                content_type=r.content_type)

    async def _serve(self, started: threading.Event) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port, ssl_context=self.tls).start()
        self._stop = asyncio.Event()
        started.set()
        await self._stop.wait()
        await runner.cleanup()

    def start(self) -> Switch:
        started = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=lambda: self._loop.run_until_complete(self._serve(started))  # type: ignore[union-attr]
            , daemon=True)
        self._thread.start()
        assert started.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)


@dataclass
class Exposition:
    """A stand-in exporter: serves whatever ``text`` holds now (set by the test)."""

    text: str = ""
    port: int = field(default_factory=free_port)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextmanager
def exporters(items: Sequence[Exposition]) -> Iterator[None]:
    """Serve every exposition on its port from one background event loop."""
    loop = asyncio.new_event_loop()
    stop: list[asyncio.Event] = []
    started = threading.Event()

    async def serve() -> None:
        runners = []
        for item in items:
            app = web.Application()

            async def metrics(_r: web.Request, item: Exposition = item) -> web.Response:
                return web.Response(text=item.text, content_type="text/plain")

            app.router.add_get("/metrics", metrics)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", item.port).start()
            runners.append(runner)
        stop.append(asyncio.Event())
        started.set()
        await stop[0].wait()
        for runner in runners:
            await runner.cleanup()

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(10)


def prometheus(folder: Path, jobs: dict[str, Sequence[str]],
               interval: str = "1s") -> AbstractContextManager[str]:
    """A real Prometheus scraping ``jobs`` (job -> addresses) every ``interval``."""
    config = {"global": {"scrape_interval": interval, "scrape_timeout": interval},
              "scrape_configs": [{"job_name": job, "static_configs": [{"targets": list(a)}]}
                                 for job, a in jobs.items()]}
    (folder / "prometheus.yml").write_text(json.dumps(config))
    return _server(folder, "prometheus", lambda port: [
        str(PROMETHEUS), f"--config.file={folder / 'prometheus.yml'}",
        f"--storage.tsdb.path={folder / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{port}"], "/-/ready")
