"""HTTP endpoints: ``/metrics`` (prometheus_client's WSGI app), ``/healthz`` and a tiny index.

A threading WSGI server from the standard library serves them; each request has exactly one
catch-all, which logs the error and counts it in ``gpu_health_exporter_http_errors_total``.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import Counter, make_wsgi_app
from prometheus_client.registry import CollectorRegistry

log = logging.getLogger(__name__)

HealthCheck = Callable[[], tuple[bool, str]]
_INDEX = b"gpu-health exporter\n/metrics  Prometheus metrics\n/healthz  collection loop health\n"


def _text() -> list[tuple[str, str]]:
    # A fresh list per response: wsgiref appends Content-Length to the list it is given.
    return [("Content-Type", "text/plain; charset=utf-8")]


def make_app(registry: CollectorRegistry, health: HealthCheck) -> WSGIApplication:
    """The exporter's WSGI application."""
    metrics_app = make_wsgi_app(registry)
    errors = Counter(
        "gpu_health_exporter_http_errors",
        "HTTP requests that failed inside the exporter, by path.",
        ["path"],
        registry=registry,
    )

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        try:
            if path == "/metrics":
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


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log: Prometheus scrapes every 15-60 s forever."""


def serve(host: str, port: int, app: WSGIApplication) -> tuple[WSGIServer, threading.Thread]:
    """Start serving ``app`` on host:port in a daemon thread; port 0 picks a free port."""
    server_class = _Server6 if ":" in host else _Server
    server = make_server(host, port, app, server_class=server_class, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    return server, thread
