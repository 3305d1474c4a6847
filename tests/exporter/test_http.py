"""/metrics, /healthz and errors on a real HTTP server bound to 127.0.0.1."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpu_health.exporter.http import make_app, serve

from .conftest import MakeExporter
from .support import FakeClock, Scrape


def get(url: str, accept: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_metrics_healthz_and_not_found(make_exporter: MakeExporter, clock: FakeClock) -> None:
    exporter = make_exporter()
    loop = exporter.loop
    app = make_app(exporter.registry, lambda: loop.health(clock(), 180))
    server, _ = serve("127.0.0.1", 0, app)
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        status, _, body = get(base + "/healthz")
        assert (status, body) == (503, "collection loop is not running\n")
        loop.interval_s = 3600  # one tick now, the next one long after this test
        loop.start()
        deadline = time.monotonic() + 20
        while loop.last_tick_at is None and time.monotonic() < deadline:
            time.sleep(0.02)  # waiting for the first tick to finish, not for time to pass
        assert get(base + "/healthz")[:2] == (200, "text/plain; charset=utf-8")
        status, ctype, body = get(base + "/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        metrics = Scrape(body)
        assert metrics.get("gpu_health_ecc_corrected_total", gpu="0", vendor="nvidia",
                           uuid="GPU-00000000-0000-0000-0000-000000000000") == 0
        status, ctype, body = get(base + "/metrics", accept="application/openmetrics-text")
        assert status == 200 and ctype.startswith("application/openmetrics-text")
        assert "gpu_health_ecc_corrected_total{" in body and body.endswith("# EOF\n")
        clock.advance(181)
        status, _, body = get(base + "/healthz")
        assert status == 503 and "no collection tick finished" in body
        assert get(base + "/nope")[0] == 404
        assert get(base + "/")[0] == 200
    finally:
        server.shutdown()
        server.server_close()


class _FailsOnce(Collector):
    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> Iterator[Metric]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("collector bug")
        yield GaugeMetricFamily("probe_ok", "fine now", value=1)


def test_a_failing_scrape_is_a_500_and_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_FailsOnce())
    server, _ = serve("127.0.0.1", 0, make_app(registry, lambda: (True, "ok")))
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        status, _, body = get(base + "/metrics")
        assert (status, body) == (500, "internal error\n")
        status, _, body = get(base + "/metrics")
        metrics = Scrape(body)
        assert status == 200
        assert metrics.get("gpu_health_exporter_http_errors_total", path="/metrics") == 1
        assert any("HTTP request for /metrics failed" in r.getMessage() for r in caplog.records)
    finally:
        server.shutdown()
        server.server_close()
