"""First-start history (``ingest.prometheus.history``): import the past, replay the worker.

With a store that holds no real sample yet, the evaluator reads ``history`` (e.g. 30 days) of
the configured Prometheus source with the backtest's importer (range queries on the step grid,
the live write rule), then replays the active rule set, and after it each shadow version of
``rules.shadow`` (stored as shadow predictions), over that period with the backtest's
engine (:func:`gpu_health.evaluator.backtest.replay.replay`: the live worker's ticks, backfill then
predict). A new user thus sees hit/miss/voided predictions and real statistics (or ``null``
with its reason) on day one. Prediction ids are deterministic, so the replayed rows are the rows
a worker running all along would have written.

While it runs, the live source and the worker wait (``/readyz`` says "importing history ...")
and nothing is sealed. Alerts: a replayed prediction whose window already ended is never
alerted (the alert loop opens alerts only for windows still open); one still open alerts as
any live prediction. A failed import is undone (its rows deleted: the store held none) and
retried after ``retry``; an import the process did not live to finish (a marker in the store,
:mod:`gpu_health.evaluator.store.history.import_marker`) is undone and redone at the next start. The
live source starts only when the history is in, so the two never interleave.

What the import does not bring: node records of nodes gone before the first live cycle (their
data is visible to an all-tenants caller only).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial

from tqdm import tqdm

from gpu_health.clock import Clock
from gpu_health.contract import SOURCE_REAL
from gpu_health.durations import format_duration
from gpu_health.errors import GpuHealthError
from gpu_health.evaluator.backtest.prometheus import PrometheusRange, import_prometheus
from gpu_health.evaluator.backtest.replay import ReplaySummary, replay
from gpu_health.evaluator.config.source import PrometheusSourceConfig
from gpu_health.evaluator.ingest.prometheus.source import (
    PrometheusSource,
    client_options,
    metric_set,
)
from gpu_health.evaluator.ingest.prometheus.window import floored
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history import import_marker
from gpu_health.evaluator.store.readings.samples import newest_sample_at

log = logging.getLogger(__name__)

HISTORY_CHUNK_STEPS = 1440  # one day at 60 s: bounded answers (series x steps) per query


class HistoryBootstrap:
    """``prepare`` (a start hook) decides; ``run`` (a background task) imports and replays."""

    def __init__(self, db: Database, config: PrometheusSourceConfig, live: PrometheusSource, *,
                 ruleset: RuleSet, keepalive: timedelta, clock: Clock,
                 retry: timedelta = timedelta(minutes=1),
                 shadows: tuple[RuleSet, ...] = ()) -> None:
        self.db = db
        self.config = config
        self.live = live
        self.ruleset = ruleset
        self.shadows = shadows
        self.keepalive = keepalive
        self.clock = clock
        self.retry = retry
        self.running = False
        self.on_done: Callable[[], Awaitable[object]] | None = None  # e.g. refresh /metrics
        self.summary: ReplaySummary | None = None
        self.period: tuple[datetime, datetime] | None = None  # what the history covers

    async def prepare(self) -> None:
        """Hold the live source back when a history import is due: the store is empty, or
        an earlier import did not finish (its rows are removed first)."""
        if not self.config.history:
            return
        unfinished = await self.db.run(import_marker.interrupted, self.db)
        if unfinished is not None:
            removed = await self.db.run(import_marker.undo, self.db)
            log.warning("ingest.prometheus.history: the import begun %s (%s to %s) did not "
                        "finish; its %d sample rows are removed and the history is imported "
                        "again", unfinished.started_at.isoformat(),
                        unfinished.since.isoformat(), unfinished.until.isoformat(), removed)
        elif await self.db.run(newest_sample_at, self.db, SOURCE_REAL) is not None:
            log.info("ingest.prometheus.history: the store already holds real samples; no "
                     "history import")
            return
        self.running = True
        self.live.status.waiting_for = "importing history from Prometheus (starting)"

    async def run(self) -> None:
        """Import and replay until it succeeds; then let the live source go on from there."""
        while self.running:
            try:
                await self._attempt()
            except Exception as exc:  # the one catch-all of this task: undo, say why, retry
                reason = exc.reason if isinstance(exc, GpuHealthError) else "internal"
                if self.live.metrics is not None:
                    self.live.metrics.errors.labels(reason).inc()
                self.live.status.waiting_for = (f"history import failed ({reason}): {exc}; "
                                                f"retrying in {format_duration(self.retry)}")
                log.error("history import failed (%s): %s; undone, retrying in %s", reason,
                          exc, format_duration(self.retry),
                          exc_info=not isinstance(exc, GpuHealthError))
                await self.db.run(import_marker.undo, self.db)
                await asyncio.sleep(self.retry.total_seconds())

    async def _attempt(self) -> None:
        c = self.config
        step = self.live.step
        until = floored(self.clock() - timedelta(seconds=c.lag), step)
        since = until - (int((c.history or 0) // step.total_seconds()) - 1) * step
        self.period = (since, until)
        source = PrometheusRange(
            url=c.url, metrics=metric_set(c), since=since, until=until, step=step,
            selector=c.selector, timeout=c.timeout,
            max_points=min(c.max_points, HISTORY_CHUNK_STEPS), client=client_options(c))

        # A bar on a terminal (tqdm shows none when stderr is not one), a log line every 10 %
        # and /readyz for everyone else.
        bar = tqdm(desc="history import", unit="chunk", file=sys.stderr, disable=None,
                   leave=False, dynamic_ncols=True)

        def progress(done: int, total: int) -> None:
            self.live.status.waiting_for = (f"importing history from Prometheus: chunk {done} of "
                                            f"{total} ({since.isoformat()} to "
                                            f"{until.isoformat()})")
            bar.total = total
            bar.update(done - bar.n)
            if done == total or done % max(1, total // 10) == 0:
                log.info("history import: %d/%d chunks", done, total)

        log.info("ingest.prometheus.history: importing %s to %s from %s", since.isoformat(),
                 until.isoformat(), c.url)
        # Before the first row: a process stopped from here on leaves the marker open, and the
        # next start redoes the import instead of taking its half for history.
        await self.db.run(import_marker.begin, self.db, self.clock(), since, until)
        with bar:
            stats = await import_prometheus(self.db, source, self.keepalive, progress)
        self.live.status.waiting_for = (f"replaying {self.ruleset.version} over the imported "
                                        "history")
        self.summary = await self.db.run(replay, self.db, self.ruleset, since, until)
        log.info("history: %d readings of %d cards imported, %d predictions replayed (%s)",
                 stats.readings, len(stats.cards), self.summary.predictions,
                 self.summary.resolved)
        for shadow in self.shadows:  # after the active version: each is a replay of its own
            self.live.status.waiting_for = (f"replaying shadow version {shadow.version} over "
                                            "the imported history")
            done = await self.db.run(partial(replay, shadow=True), self.db, shadow, since, until)
            log.info("history: shadow version %s: %d predictions replayed (%s)",
                     shadow.version, done.predictions, done.resolved)
        await self.db.run(import_marker.finish, self.db, self.clock())
        self.live.resume_at(until)
        self.live.status.waiting_for = None
        self.running = False
        if self.on_done is not None:  # the figures of the replayed history, at once
            await self.on_done()
