"""The scrape loop's tick: discover -> scrape all -> self-metrics -> ingest -> evict idle.

Kept apart from the app so tests and the benchmark drive exactly the production cycle
(``await pipeline.run_cycle()``) without starting timers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from gpu_health.clock import Clock
from gpu_health.errors import StoreError
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cycle import CycleReport, Ingestor
from gpu_health.evaluator.ingest.identity import NodeNames, resolve_nodes
from gpu_health.evaluator.ingest.scrape import Scraper, ScrapeResult
from gpu_health.evaluator.selfmetrics import SelfMetrics

log = logging.getLogger(__name__)
FAILED_WRITES = 3  # consecutive failed cycles before /readyz says so (one is a blip)
LOGGED_TRANSITIONS = 10  # target up/down lines per cycle; the rest are summarised
YIELD_EVERY = 500  # targets' series updated between two yields to the event loop


class IngestPipeline:
    """One object per app; ``run_cycle`` is the scrape loop's tick."""

    def __init__(self, *, targets: Callable[[], Sequence[Target]], scraper: Scraper,
                 ingestor: Ingestor, clock: Clock, metrics: SelfMetrics | None = None,
                 names: NodeNames | None = None) -> None:
        self.targets = targets
        self.names = names  # where the exporters' own node names are learned
        self.scraper = scraper
        self.ingestor = ingestor
        self.clock = clock
        self.metrics = metrics
        self.last_results: dict[str, ScrapeResult] = {}
        self.last_report: CycleReport | None = None
        self.last_duration: float | None = None
        self._evicted = (0, 0)
        self._up: dict[str, bool] = {}
        self.failed_writes = 0  # consecutive cycles whose write to the store failed
        self.failed_reason: str | None = None

    async def run_cycle(self) -> CycleReport:
        started = time.perf_counter()
        targets = list(self.targets())
        results = resolve_nodes(await self.scraper.scrape_all(targets))
        if self.names is not None:
            self.names.learn(results, {t.url for t in targets})
        self.last_results = {r.target.url: r for r in results}
        await self._record_targets(results)
        try:
            report = await self.ingestor.ingest(results)
        except StoreError as exc:  # counted by the loop's catch-all; remembered for /readyz
            self.failed_writes += 1
            self.failed_reason = exc.reason
            raise
        self.failed_writes, self.failed_reason = 0, None
        self.ingestor.evict_idle(self.clock())
        self.last_duration = time.perf_counter() - started
        self.last_report = report
        self._record_cycle(report, self.last_duration)
        log.debug("cycle: %d/%d targets up, %d cards, %d rows (%d XID, %d SXid rows) written, "
                  "%d selects in %.3fs", report.targets_up, report.targets, report.cards,
                  report.rows_written, report.xid_rows_written, report.sxid_rows_written,
                  report.selects, self.last_duration)
        return report

    def not_ready(self) -> str | None:
        """/readyz: not ready once FAILED_WRITES cycles in a row could not write (a revoked
        table, a full disk): scraping alone is not collecting."""
        if self.failed_writes < FAILED_WRITES:
            return None
        return (f"the last {self.failed_writes} ingest cycles could not write to the store "
                f"({self.failed_reason})")

    async def _record_targets(self, results: Sequence[ScrapeResult]) -> None:
        # Log transitions only: a dead target would otherwise log once per cycle forever. At
        # most LOGGED_TRANSITIONS lines each way per cycle, then one summary: 20,000 new
        # targets on a closed port logged 20,000 lines from the event loop.
        down, up = [], []
        for r in results:
            previous = self._up.get(r.target.url)
            if not r.ok and previous is not False:
                down.append(r)
            elif r.ok and previous is False:
                up.append(r)
        for r in down[:LOGGED_TRANSITIONS]:
            log.warning("target %s (node %s) is down: %s: %s", r.target.url,
                        r.target.node_id, r.error_reason, r.error)
        for r in up[:LOGGED_TRANSITIONS]:
            log.info("target %s (node %s) is up again", r.target.url, r.target.node_id)
        for level, rest, text in (
                (logging.WARNING, len(down), "went down this cycle (each is listed at /targets)"),
                (logging.INFO, len(up), "are up again this cycle")):
            if rest > LOGGED_TRANSITIONS:
                log.log(level, "%d more targets %s", rest - LOGGED_TRANSITIONS, text)
        self._up = {r.target.url: r.ok for r in results}  # targets that left are forgotten
        m = self.metrics
        if m is None:
            return
        for i, r in enumerate(results):
            if i and i % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # 20,000 targets' series took 1.2 s in one step
            m.target_result(r.target.url, r.target.node_id, r.duration, r.error_reason,
                            r.scraped_at.timestamp())
            if r.ok:
                m.count(m.series_ignored, r.extraction.ignored_series)
                m.count(m.values_unknown, r.extraction.unknown_values)
        m.forget_targets(r.target.url for r in results)

    def _record_cycle(self, report: CycleReport, duration: float) -> None:
        m = self.metrics
        if m is None:
            return
        m.cycle_duration.observe(duration)
        cache = self.ingestor.cache
        capacity, idle = cache.evicted_capacity, cache.evicted_idle
        if capacity > self._evicted[0]:
            m.cache_evictions.labels("capacity").inc(capacity - self._evicted[0])
        if idle > self._evicted[1]:
            m.cache_evictions.labels("idle").inc(idle - self._evicted[1])
        self._evicted = (capacity, idle)
        m.cache_entries.set(len(cache))
