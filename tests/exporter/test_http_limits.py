"""Nobody can tie the exporter up: idle and half-sent connections cost no thread, are closed
after the read timeout, and past ``max_connections`` new ones are closed at once, while
/metrics keeps answering. Real sockets on 127.0.0.1 against the real server."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import CollectorRegistry

from gpu_health.exporter.http import HttpServer, make_app, serve

from .support import Scrape

HALF_OPEN = 300


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@contextmanager
def exporter_server(**limits: float) -> Iterator[tuple[HttpServer, CollectorRegistry]]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Card())
    server, _ = serve("127.0.0.1", 0, make_app(registry, lambda: (True, "ok")),
                      registry=registry, **limits)
    try:
        yield server, registry
    finally:
        server.shutdown()


class _Card:
    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("gpu_health_gpu_info", "a card", value=1)


def half_open(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never finished
    return sock


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_300_half_open_connections_do_not_tie_it_up() -> None:
    with exporter_server() as (server, _), ExitStack() as held:
        before_rss, before_threads = rss_bytes(), threading.active_count()
        for _ in range(HALF_OPEN):
            held.enter_context(half_open(server.server_port))
        started = time.monotonic()
        body = metrics(server.server_port)
        answered_in = time.monotonic() - started
        threads, grown = threading.active_count(), rss_bytes() - before_rss
        assert "gpu_health_gpu_info 1.0" in body
        assert threads < 64, threads  # thread-per-connection had 300+
        assert threads - before_threads <= 5  # the loop thread and the WSGI workers
        assert grown < 64 * 1024 * 1024, grown  # a few KiB per connection
        assert answered_in < 5
        assert server.connections() >= HALF_OPEN
        scraped = Scrape(body)
        assert (scraped.get("gpu_health_exporter_http_connections") or 0) >= HALF_OPEN


def test_a_half_sent_request_is_closed_after_the_read_timeout() -> None:
    with exporter_server(read_timeout=0.5) as (server, _):
        sock = half_open(server.server_port)
        idle = socket.create_connection(("127.0.0.1", server.server_port), timeout=5)
        with sock, idle:
            # waiting for the server to act on its own timeout, bounded by a deadline
            assert closed_by_server(sock, within=10)
            assert closed_by_server(idle, within=10)
        assert "gpu_health_gpu_info" in metrics(server.server_port)


def test_past_max_connections_new_ones_are_closed_at_once_and_counted() -> None:
    with exporter_server(max_connections=10) as (server, _), ExitStack() as held:
        for _ in range(10):
            held.enter_context(half_open(server.server_port))
        deadline = time.monotonic() + 10
        while server.connections() < 10 and time.monotonic() < deadline:
            time.sleep(0.01)  # the loop thread registers the connections
        extra = socket.create_connection(("127.0.0.1", server.server_port), timeout=5)
        with extra:
            assert closed_by_server(extra, within=5)
        assert server.refused >= 1
