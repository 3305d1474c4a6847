"""HTTP endpoints: ``/metrics`` (prometheus_client's WSGI app), ``/healthz`` and a tiny index.

The application is WSGI (content negotiation, gzip and ``name[]`` filters come from
prometheus_client); the server is not a thread per connection. Thread-per-connection let each
half-sent request hold a thread forever (300 idle connections gave 308 threads), so the node's
exporter could be tied up by anyone who can reach its port. Instead:

- one event-loop thread (aiohttp) reads every connection; a connection that has not sent a
  complete request within ``read_timeout`` (idle keep-alive included) is closed;
- at most ``max_connections`` connections are open at once; one more is closed at once and
  counted in ``gpu_health_exporter_http_connections_refused_total``;
- complete requests run the WSGI app on ``workers`` threads (a scrape is a few milliseconds).

So the thread count is fixed (1 + ``workers``) and memory grows with at most
``max_connections`` small connection objects. Each request has exactly one catch-all, which
logs the error and counts it in ``gpu_health_exporter_http_errors_total``.
"""

from __future__ import annotations

import asyncio
import io
import logging
import math
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from aiohttp import web
from prometheus_client import Counter, PlatformCollector, ProcessCollector, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpu_health.logins import LoginVerdict
from gpu_health.webguard import REALM, WebGuard

from .wsgi import call_wsgi, environ_for

log = logging.getLogger(__name__)

HealthCheck = Callable[[], tuple[bool, str]]
WsgiApp = Callable[..., Iterable[bytes]]
_INDEX = b"gpu-health exporter\n/metrics  Prometheus metrics\n/healthz  collection loop health\n"
READ_TIMEOUT_S: Final = 15.0
MAX_CONNECTIONS: Final = 1024
WORKERS: Final = 4


def _text() -> list[tuple[str, str]]:
    return [("Content-Type", "text/plain; charset=utf-8")]


class _Delegate(Collector):
    """Another registry's metrics, so the served page can add the process's own."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        return self._registry.collect()


def served_registry(registry: CollectorRegistry) -> CollectorRegistry:
    """What ``/metrics`` serves: the exporter's metrics plus ``process_*`` and
    ``python_info``, as every Prometheus exporter has. Not in ``--once``/``--textfile``
    output: node_exporter's textfile collector would clash with its own ``process_*``."""
    served = CollectorRegistry(auto_describe=False)
    served.register(_Delegate(registry))
    ProcessCollector(registry=served)
    PlatformCollector(registry=served)
    return served


def make_app(registry: CollectorRegistry, health: HealthCheck) -> WsgiApp:
    """The exporter's WSGI application (also counts the server's refused connections)."""
    metrics_app = make_wsgi_app(served_registry(registry))
    errors = Counter(
        "gpu_health_exporter_http_errors",
        "HTTP requests that failed inside the exporter, by path.",
        ["path"],
        registry=registry,
    )

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        try:
            if path == "/metrics":
                # prometheus_client answers HEAD with 405; a HEAD is a GET without the body
                # (aiohttp drops it and keeps Content-Length).
                if environ.get("REQUEST_METHOD") == "HEAD":
                    environ = {**environ, "REQUEST_METHOD": "GET"}
                return metrics_app(environ, start_response)
            if path == "/healthz":
                ok, why = health()
                start_response("200 OK" if ok else "503 Service Unavailable", _text())
                return [why.encode() + b"\n"]
            if path == "/":
                start_response("200 OK", _text())
                return [_INDEX]
            start_response("404 Not Found", _text())
            return [b"not found\n"]
        except Exception:  # the request's one catch-all
            log.exception("HTTP request for %s failed", path)
            errors.labels(path if path in ("/metrics", "/healthz") else "other").inc()
            start_response("500 Internal Server Error", _text(), sys.exc_info())
            return [b"internal error\n"]

    return app


class _Refuse(asyncio.Protocol):
    """What a connection over the listener's connection limit gets: closed at once, nothing
    read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if not host and socket.has_dualstack_ipv6():
        return socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)
    return socket.create_server((host, port), family=family)


class HttpServer:
    """The exporter's server: one event-loop thread plus ``workers`` WSGI threads."""

    def __init__(self, host: str, port: int, app: WsgiApp, *,
                 read_timeout: float = READ_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS,
                 workers: int = WORKERS, guard: WebGuard | None = None) -> None:
        self._guard = guard  # --web.config.file: TLS and basic auth
        self._sock = _bind(host, port)  # OSError (port taken) before any thread starts
        self.server_port = int(self._sock.getsockname()[1])
        self._app = app
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.refused = 0
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http-wsgi")
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._started = threading.Event()
        self.thread = threading.Thread(target=self._run, name="http", daemon=True)

    def start(self) -> None:
        self.thread.start()
        self._started.wait()

    def connections(self) -> int:
        runner = self._runner
        return 0 if runner is None or runner.server is None else len(runner.server.connections)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._close())
        self._loop.close()

    async def _serve(self) -> None:
        application = web.Application()
        application.router.add_route("*", "/{tail:.*}", self._handle)
        # keepalive_timeout also bounds a connection's first request (aiohttp >= 3.10 arms it
        # when the connection is made): a half-sent request is dropped after read_timeout.
        self._runner = web.AppRunner(application, access_log=None, handle_signals=False,
                                     keepalive_timeout=self.read_timeout)
        await self._runner.setup()
        server = self._runner.server
        assert server is not None

        def protocol() -> asyncio.BaseProtocol:
            if len(server.connections) >= self.max_connections:
                self.refused += 1
                return _Refuse()
            if self._guard is not None:
                self._guard.admit()
            return server()

        tls = None if self._guard is None else self._guard.context
        await self._loop.create_server(protocol, sock=self._sock, ssl=tls,
                                       ssl_handshake_timeout=self.read_timeout if tls else None)

    async def _handle(self, request: web.Request) -> web.Response:
        guard = self._guard
        if guard is not None and guard.basic_auth:  # bcrypt is slow: off the event loop
            verdict, wait = await self._loop.run_in_executor(
                self._executor, guard.authorize, request.headers.get("Authorization"),
                request.remote or "unknown")
            if verdict is LoginVerdict.THROTTLED:  # answered before any bcrypt runs
                return web.Response(status=429, text="too many password checks\n",
                                    headers={"Retry-After": str(max(1, math.ceil(wait)))})
            if verdict is not LoginVerdict.OK:
                return web.Response(status=401, text="unauthorized\n",
                                    headers={"WWW-Authenticate": REALM})
        environ = environ_for(request, io.StringIO())
        status, headers, body = await self._loop.run_in_executor(
            self._executor, call_wsgi, self._app, environ)
        return web.Response(status=status, headers=headers, body=body)

    async def _close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def shutdown(self) -> None:
        """Stop serving and wait for the loop thread (idempotent)."""
        if self.thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self.thread.join(timeout=10)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._sock.close()

    def server_close(self) -> None:
        self.shutdown()


class _ServerCollector(Collector):
    """Open and refused connections, read from the server when /metrics is scraped."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server

    def collect(self) -> Iterable[Metric]:
        open_now = GaugeMetricFamily(
            "gpu_health_exporter_http_connections", "HTTP connections open now (at most "
            f"{self.server.max_connections}).")
        open_now.add_metric([], self.server.connections())
        refused = CounterMetricFamily(
            "gpu_health_exporter_http_connections_refused", "Connections closed at once because "
            "max_connections were already open.")
        refused.add_metric([], self.server.refused)
        return (open_now, refused)


def serve(host: str, port: int, app: WsgiApp, *, registry: CollectorRegistry | None = None,
          **limits: Any) -> tuple[HttpServer, threading.Thread]:
    """Start serving ``app`` on host:port; port 0 picks a free port. OSError when the address
    cannot be bound. With ``registry``, the server's connection metrics are registered on it."""
    server = HttpServer(host, port, app, **limits)
    if registry is not None:
        registry.register(_ServerCollector(server))
    server.start()
    return server, server.thread
