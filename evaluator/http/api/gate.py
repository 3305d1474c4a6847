"""Load shedding for the read API: a bounded number of requests at the store at once, a bounded
queue behind them, and a 503 with ``Retry-After`` beyond.

Every API request runs its statements on the store's small thread pool, the same pool the
ingest cycle and the worker use. Unbounded, 200 concurrent clients queued 200 requests' worth
of statements ahead of them: the minute's ingest cycle took 8.8 s instead of 0.14 s and the
API's own p99 was 13 s (bench/api_load.py: 6-14x the cycle alone). With the gate, at most
``max_concurrency`` API requests use the store at a time, at most ``max_queue`` wait (each at
most ``queue_timeout``), and everyone else is told at once to come back (``503``,
``Retry-After: 1``), as a busy Prometheus query engine does. The health endpoints and /metrics
never pass here. A request whose store work takes longer than ``timeout`` (a frozen database)
is answered 503 too. Counted in ``gpu_health_evaluator_api_shed_total{reason}``
(``queue_full``, ``wait_timeout``, ``timeout``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge

from gpu_health.errors import ApiError
from gpu_health.evaluator.config.api import ApiConfig

RETRY_AFTER_S = 1


class ApiGate:
    def __init__(self, limits: ApiConfig, registry: CollectorRegistry) -> None:
        self.limits = limits
        self._free = asyncio.Semaphore(limits.max_concurrency)
        self._waiting = 0
        self._held = 0  # priority ticks running now (ingest, worker)
        self._open = asyncio.Event()
        self._open.set()
        self.shed = Counter("gpu_health_evaluator_api_shed", "API requests answered 503 "
                            "because the API was busy or the store slow, by reason (queue_full, "
                            "wait_timeout, timeout)",
                            ["reason"], registry=registry)
        for reason in ("queue_full", "wait_timeout", "timeout"):
            self.shed.labels(reason)
        self.queued = Gauge("gpu_health_evaluator_api_queued", "API requests waiting for a "
                            "turn at the store", registry=registry)
        self.queued.set_function(lambda: float(self._waiting))

    @asynccontextmanager
    async def priority(self) -> AsyncIterator[None]:
        """Held by an ingest cycle or a worker tick: no API request starts at the store
        meanwhile (those waiting keep their place, bounded by ``queue_timeout``); one already
        running finishes. Cycles are short and a minute apart, so the API waits seconds at
        most while the collection keeps its interval under any number of clients."""
        self._held += 1
        self._open.clear()
        try:
            yield
        finally:
            self._held -= 1
            if self._held == 0:
                self._open.set()

    async def _take_turn(self) -> None:
        """A free slot while no priority tick runs. The tick is checked again once the slot
        is ours: every request released when one tick ended would otherwise start at the
        store during the next one, one after the other (bench/api_load.py: back-to-back
        ticks 2.4x slower)."""
        while True:
            await self._open.wait()
            await self._free.acquire()
            if self._open.is_set():
                return
            self._free.release()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for a turn at the store (bounded), or raise a 503 ApiError."""
        if self._free.locked() and self._waiting >= self.limits.max_queue:
            self.shed.labels("queue_full").inc()
            raise ApiError(503, f"the API is busy ({self.limits.max_queue} requests already "
                           "waiting): retry later", retry_after=RETRY_AFTER_S)
        self._waiting += 1
        try:
            async with asyncio.timeout(self.limits.queue_timeout):
                await self._take_turn()
        except TimeoutError:
            self.shed.labels("wait_timeout").inc()
            raise ApiError(503, f"the API is busy (no turn within "
                           f"{self.limits.queue_timeout:g}s): retry later",
                           retry_after=RETRY_AFTER_S) from None
        finally:
            self._waiting -= 1
        try:
            async with asyncio.timeout(self.limits.timeout):
                yield
        except TimeoutError:
            self.shed.labels("timeout").inc()
            raise ApiError(503, f"the store did not answer within {self.limits.timeout:g}s: "
                           "retry later", retry_after=RETRY_AFTER_S) from None
        finally:
            self._free.release()
