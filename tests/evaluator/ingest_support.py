"""Helpers for the ingest tests: exposition text as the exporter writes it, and a real stand-in
exporter (aiohttp on 127.0.0.1) whose per-path behaviour each test sets.

The text is rendered by prometheus_client itself (the exporter's library), so the tests parse
exactly the shapes the exporter emits: ``# HELP``/``# TYPE`` lines, ``_total`` suffixes, label
escaping, ``NaN``/``+Inf`` spellings.
"""

from __future__ import annotations

import asyncio
import gzip
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpu_health.contract import COUNTER_KEYS, INFO_METRIC, METRIC_HELP, METRIC_PREFIX, METRIC_TYPES
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.model import Counters

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Card:
    gpu: int
    uuid: str | None
    counters: Counters
    xids: dict[int, int] | None = None  # gpu_health_xid_errors_total by code; None: not exported


class FakeClock:
    """An injected clock: tests move it explicitly, nothing sleeps."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> datetime:
        self.now += timedelta(**kwargs)
        return self.now


class _Cards(Collector):
    def __init__(self, cards: Sequence[Card], vendor: str, model: str) -> None:
        self.cards, self.vendor, self.model = cards, vendor, model

    def collect(self) -> list[Metric]:
        labels = ["gpu", "uuid", "vendor"]
        info = GaugeMetricFamily(INFO_METRIC, "Cards the vendor tool listed.",
                                 labels=[*labels, "model"])
        families: list[Metric] = [info]
        for key in COUNTER_KEYS:
            name = METRIC_PREFIX + key
            family: CounterMetricFamily | GaugeMetricFamily
            if METRIC_TYPES[key] == "counter":
                family = CounterMetricFamily(name.removesuffix("_total"),
                                                     METRIC_HELP[key], labels=labels)
            else:
                family = GaugeMetricFamily(name, METRIC_HELP[key], labels=labels)
            for card in self.cards:
                value = getattr(card.counters, key)
                if value is not None:  # unknown is absent, never 0
                    family.add_metric([str(card.gpu), card.uuid or "", self.vendor], value)
            families.append(family)
        for card in self.cards:
            info.add_metric([str(card.gpu), card.uuid or "", self.vendor, self.model], 1)
        if any(card.xids is not None for card in self.cards):
            # As the exporter writes it (exporter/xid_store.py): a counter family whose samples
            # carry the `_total` suffix, one per card and XID code.
            xid = CounterMetricFamily("gpu_health_xid_errors", "Kernel-log Xid lines per card "
                                      "and code since the exporter started.",
                                      labels=[*labels, "xid"])
            for card in self.cards:
                for code, count in sorted((card.xids or {}).items()):
                    xid.add_metric([str(card.gpu), card.uuid or "", self.vendor, str(code)],
                                   float(count))
            families.append(xid)
        return families


def render(cards: Sequence[Card], vendor: str = "nvidia",
           model: str = "NVIDIA A100-SXM4-80GB") -> str:
    """The exposition text the exporter would serve for ``cards``."""
    registry = CollectorRegistry()
    registry.register(_Cards(cards, vendor, model))
    return generate_latest(registry).decode()


def a100(corrected: int | None = 0, uncorrected: int | None = 0) -> Counters:
    return Counters(ecc_uncorrected_total=uncorrected, ecc_corrected_total=corrected,
                    retired_pages=None, remapped_rows_pending=0, remapped_rows_failure=0)


class StandIn:
    """A real HTTP server on 127.0.0.1; ``bodies[name]`` is served at ``/t/<name>/metrics``.

    Special bodies: ``"!hang"`` never answers, ``"!500"`` answers 500, ``"!huge"`` streams
    100 MB of sample lines without a Content-Length, ``"!huge-declared"`` declares 100 MB,
    ``"!gzip-bomb"`` sends ~20 KB of gzip that inflates to 20 MB.
    Bodies are gzip-compressed when the client accepts it, as prometheus_client does.
    """

    HUGE = 100 * 1024 * 1024

    def __init__(self) -> None:
        self.bodies: dict[str, str | bytes] = {}  # bytes are served as they are
        self.requests: Counter[str] = Counter()
        self.gzip = True
        self.port = 0
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.requests[name] += 1
        body = self.bodies.get(name)
        if body is None:
            raise web.HTTPNotFound()
        if isinstance(body, bytes):
            return web.Response(body=body)
        if body == "!hang":
            await self._release.wait()
        if body == "!500":
            raise web.HTTPInternalServerError()
        if body.startswith("!huge"):
            return await self._huge(request, declared=body == "!huge-declared")
        if body == "!gzip-bomb":
            return web.Response(body=_bomb(), headers={"Content-Encoding": "gzip"})
        data = body.encode()
        headers = {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
        if self.gzip and "gzip" in request.headers.get("Accept-Encoding", ""):
            data = gzip.compress(data)
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=data, headers=headers)

    async def _huge(self, request: web.Request, declared: bool) -> web.StreamResponse:
        response = web.StreamResponse()
        if declared:
            response.content_length = self.HUGE
        await response.prepare(request)
        chunk = b'gpu_health_ecc_corrected_total{gpu="0",uuid="",vendor="nvidia"} 1\n' * 16384
        sent = 0
        try:
            while sent < self.HUGE:
                await response.write(chunk)
                sent += len(chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the client gave up, as it should
        return response

    def target(self, name: str, node: str | None = None, tenant: str | None = None) -> Target:
        return Target(address=f"127.0.0.1:{self.port}", node_id=node or name, tenant=tenant,
                      metrics_path=f"/t/{name}/metrics")

    async def start(self) -> None:
        _bomb()  # built outside any request, so it never eats a test's scrape timeout
        app = web.Application()
        app.router.add_get("/t/{name}/metrics", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def close(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()


_BOMB: list[bytes] = []


def _bomb() -> bytes:
    if not _BOMB:
        _BOMB.append(gzip.compress(b"#" * (20 * 1024 * 1024), compresslevel=9))
    return _BOMB[0]


@asynccontextmanager
async def stand_in() -> AsyncIterator[StandIn]:
    server = StandIn()
    await server.start()
    try:
        yield server
    finally:
        await server.close()
