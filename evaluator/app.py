"""The evaluator process: config, store, clock, self-metrics, background loops and the web app.

Extension points for the parts that land later (prediction worker, read API, alert pusher); call
them after constructing :class:`EvaluatorApp` and before the web app starts:

- routes: ``add_api_routes(evaluator_app.web_app, evaluator_app)`` or
  ``evaluator_app.web_app.router.add_get(path, handler)``; handlers find the EvaluatorApp with
  ``request.app[EVALUATOR_APP]``;
- periodic work: ``evaluator_app.add_loop(name, interval_s, tick)``: ``tick`` is an async
  callable run every ``interval_s`` with the single catch-all that logs and counts
  ``gpu_health_evaluator_loop_errors_total{loop=name,reason}`` (reason from GpuHealthError);
- any other coroutine: ``evaluator_app.add_background(name, factory)`` (started on start-up,
  cancelled on shutdown);
- metrics: ``evaluator_app.registry.register(collector)``;
- readiness: ``evaluator_app.add_ready_check(name, fn)``, ``fn() -> str | None`` (None: ready).
``evaluator_app.db`` (a :class:`Database`) is open from start-up until shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry

from evaluator.dedup import DedupCache
from evaluator.ingest import Ingestor
from evaluator.ingest_pipeline import IngestPipeline
from evaluator.ingest_retention import Retention
from evaluator.scrape import Scraper
from evaluator.selfmetrics import SelfMetrics
from evaluator.selfmetrics_http import add_core_routes, error_middleware
from evaluator.settings import Config
from evaluator.store.db import Database
from evaluator.targets_sd import TICK_SECONDS, Discovery
from gpu_health.clock import Clock, system_clock
from gpu_health.errors import GpuHealthError

log = logging.getLogger(__name__)

EVALUATOR_APP: Final = web.AppKey("evaluator_app", object)
LoopTick = Callable[[], Awaitable[object]]


class EvaluatorApp:
    """Holds everything one evaluator process owns; ``web_app`` runs it (aiohttp cleanup_ctx)."""

    def __init__(self, config: Config, *, clock: Clock = system_clock,
                 registry: CollectorRegistry | None = None, db: Database | None = None,
                 start_loops: bool = True) -> None:
        self.config = config
        self.clock = clock
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = SelfMetrics(self.registry)
        self.db: Database | None = db
        self._owns_db = db is None
        self.start_loops = start_loops
        self.discovery = Discovery(config, metrics=self.metrics)
        self.cache = DedupCache(config.dedup.max_entries,
                                timedelta(seconds=config.dedup.idle_seconds))
        self.pipeline: IngestPipeline | None = None
        self.retention: Retention | None = None
        self.started_at = clock()
        self.loop_ticks: dict[str, float] = {}  # loop name -> event-loop time of last tick end
        self.loops_started_at: float | None = None
        self._loops: list[tuple[str, float, LoopTick]] = []
        self._background: list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]] = []
        self._ready_checks: list[tuple[str, Callable[[], str | None]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.web_app = web.Application(middlewares=[error_middleware(self.metrics)])
        self.web_app[EVALUATOR_APP] = self
        add_core_routes(self.web_app, self)
        self.web_app.cleanup_ctx.append(self._lifecycle)

    # -- extension points ---------------------------------------------------------------------

    def add_loop(self, name: str, interval_s: float, tick: LoopTick) -> None:
        self._loops.append((name, interval_s, tick))

    def add_background(self, name: str, factory: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._background.append((name, factory))

    def add_ready_check(self, name: str, check: Callable[[], str | None]) -> None:
        self._ready_checks.append((name, check))

    # -- state --------------------------------------------------------------------------------

    def readiness(self) -> dict[str, str | None]:
        """Each check -> None when fine, else why not ready."""
        checks: dict[str, str | None] = {
            "store": None if self.db is not None and self.pipeline is not None
            else "database not open yet",
            "discovery": None if self.discovery.ready else "target discovery has not produced "
            "a target list from every source yet",
        }
        for name, check in self._ready_checks:
            try:
                checks[name] = check()
            except Exception as exc:  # a broken check must not break /readyz itself
                checks[name] = f"check failed: {exc}"
        return checks

    # -- lifecycle ----------------------------------------------------------------------------

    async def _lifecycle(self, _app: web.Application) -> AsyncIterator[None]:
        await self.open()
        try:
            yield
        finally:
            await self.close()

    async def open(self) -> None:
        """Open the store, build the ingest pipeline, run discovery once, start the loops."""
        cfg = self.config
        if self.db is None:
            self.db = await asyncio.to_thread(Database, cfg.storage_path)
        self.metrics.watch_statements(lambda: self.db.statements if self.db else 0)
        self.retention = Retention(self.db, days=cfg.retention_days, clock=self.clock,
                                   metrics=self.metrics)
        scraper = Scraper(timeout=cfg.scrape.timeout, max_concurrency=cfg.scrape.max_concurrency,
                          max_response_bytes=cfg.scrape.max_response_bytes, clock=self.clock)
        await scraper.__aenter__()
        ingestor = Ingestor(self.db, self.cache, keepalive=timedelta(seconds=cfg.keepalive_seconds),
                            source=cfg.ingest_source,
                            metrics=self.metrics, on_written=self.retention.note_written)
        self.pipeline = IngestPipeline(targets=lambda: self.discovery.targets, scraper=scraper,
                                       ingestor=ingestor, clock=self.clock, metrics=self.metrics)
        await self.discovery.start()
        await self._guarded("discovery", self._discover)
        self._loops[:0] = [("discovery", TICK_SECONDS, self._discover),
                           ("ingest", cfg.scrape.interval, self.pipeline.run_cycle)]
        if self.start_loops:
            self.loops_started_at = asyncio.get_running_loop().time()
            for name, interval, tick in self._loops:
                self._spawn(name, self._periodic(name, interval, tick))
            for name, factory in self._background:
                self._spawn(name, factory())
        log.info("evaluator ready: storage %s, %d target(s), listening on %s",
                 cfg.storage_path, len(self.discovery.targets), cfg.listen_address)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self.retention is not None:
            await self.retention.close()
        if self.pipeline is not None:
            await self.pipeline.scraper.close()
        await self.discovery.close()
        if self.db is not None and self._owns_db:
            await asyncio.to_thread(self.db.close)
            self.db = None

    async def _discover(self) -> None:
        await self.discovery.refresh(self.clock())

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro, name=name))

    async def _guarded(self, name: str, tick: LoopTick) -> None:
        """Run one tick under the loop's single catch-all."""
        try:
            await tick()
        except Exception as exc:  # the one catch-all of every loop tick
            reason = exc.reason if isinstance(exc, GpuHealthError) else "internal"
            log.error("%s loop tick failed (%s): %s", name, reason, exc,
                      exc_info=not isinstance(exc, GpuHealthError))
            self.metrics.loop_error(name, reason)
        self.loop_ticks[name] = asyncio.get_running_loop().time()

    async def _periodic(self, name: str, interval: float, tick: LoopTick) -> None:
        """Tick every ``interval`` seconds on a fixed grid; an overrun skips the missed slots."""
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        if name == "discovery":
            next_at += interval  # already ran once during start-up
        while True:
            delay = next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._guarded(name, tick)
            next_at += interval
            behind = loop.time() - next_at
            if behind > 0:
                next_at += interval * (int(behind // interval) + 1)
