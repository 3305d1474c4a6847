"""The live Prometheus source: each cycle reads the new steps and feeds the scrape path's ingestor.

A cycle (the ``ingest`` loop's tick when ``ingest.source: prometheus``):

1. the window (:mod:`window`): the steps after the last one read, up to ``now - lag``, at most
   ``max_catchup`` of them (older ones are skipped and counted: the gap stays a gap). After a
   restart, the last step read is the newest stored real row;
2. per chunk of at most ``max_points`` steps, one range query per metric (the counters', the
   info metric's, the XID and SXid metrics'), concurrently;
3. the answers reshaped into per-step scrape results (:mod:`steps`), fed to the ingestor step
   by step in time order: write rule, dedup, keepalive, XID and SXid rows and node records are
   the scrape path's own code;
4. the cursor moves past a chunk only after its rows are written.

A failed query (Prometheus down, an error answer, a limit exceeded) fails the cycle with a
:class:`~gpu_health.errors.SourceError`: nothing of that chunk is written, the error is counted
by reason, ``/readyz`` says why until a cycle succeeds, and the next cycle starts from the same
cursor. A chunk written before the failure stays written (the cursor is past it).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import aiohttp

from gpu_health.clock import Clock
from gpu_health.errors import SourceError
from gpu_health.evaluator.config.source import PrometheusSourceConfig
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cycle import CycleReport, Ingestor
from gpu_health.evaluator.ingest.prometheus.assembly import Assembly, add_series
from gpu_health.evaluator.ingest.prometheus.metricsets import (
    METRIC_SETS,
    MetricSet,
    index_map,
    selector_query,
)
from gpu_health.evaluator.ingest.prometheus.query import (
    QueryLimits,
    QueryStats,
    RangeQuerier,
    chunks,
)
from gpu_health.evaluator.ingest.prometheus.source_metrics import SourceMetrics
from gpu_health.evaluator.ingest.prometheus.steps import node_targets, step_results
from gpu_health.evaluator.ingest.prometheus.sxids import add_sxids
from gpu_health.evaluator.ingest.prometheus.window import Window, next_window
from gpu_health.evaluator.ingest.prometheus.xids import LastXidTracker, XidReadings, xid_readings
from gpu_health.evaluator.ingest.scrape import ScrapeResult
from gpu_health.evaluator.outbound import ClientOptions, client_session
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.samples import newest_sample_at

log = logging.getLogger(__name__)


def metric_set(config: PrometheusSourceConfig) -> MetricSet:
    """The configured metric set with the configured label names."""
    return METRIC_SETS[config.metrics].relabelled(
        node=config.label("node"), index=config.label("index"), uuid=config.label("uuid"),
        tenant=config.label("tenant"))


def client_options(config: PrometheusSourceConfig, concurrency: int = 4) -> ClientOptions:
    return ClientOptions(total_timeout=config.timeout, connect_timeout=min(config.timeout, 10.0),
                         max_connections=concurrency, headers={"Accept-Encoding": "gzip"},
                         bearer_token=config.bearer_token, basic_auth=config.basic_auth,
                         ca_file=config.ca_file,
                         insecure_skip_verify=config.insecure_skip_verify)


@dataclass(slots=True)
class SourceStatus:
    """What ``/targets`` and ``/readyz`` say about the source."""

    cursor: datetime | None = None  # the last step read and written
    last_success: datetime | None = None
    last_error: tuple[datetime, str, str] | None = None  # (when, reason, message)
    failing: bool = False
    waiting_for: str | None = None  # e.g. the first-start history import
    following: bool = False  # several evaluators: another one (the leader) reads
    last_report: CycleReport | None = None
    seen: dict[str, tuple[ScrapeResult, datetime]] = field(default_factory=dict)


class PrometheusSource:
    """One per process; ``run_cycle`` is the ingest loop's tick (``async with`` for the
    session)."""

    def __init__(self, config: PrometheusSourceConfig, *, step: timedelta, db: Database,
                 ingestor: Ingestor, clock: Clock, metrics: SourceMetrics | None = None,
                 forget_after: timedelta = timedelta(hours=1)) -> None:
        self.config = config
        self.ms = metric_set(config)
        self.step = step
        self.db = db
        self.ingestor = ingestor
        self.clock = clock
        self.metrics = metrics
        self.forget_after = forget_after
        self.status = SourceStatus()
        self.xids = LastXidTracker()
        self._target = node_targets(config.url)
        self._session: aiohttp.ClientSession | None = None
        self._resumed = False

    async def __aenter__(self) -> PrometheusSource:
        await self.open()
        return self

    async def open(self) -> None:
        """Create the session (call with the event loop running)."""
        if self._session is None:
            self._session = client_session(client_options(self.config))

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def standby(self, following: bool) -> None:
        """Several evaluators: only the leader reads. On a change of leadership (this one
        stops leading, or leads with a new lease) everything remembered goes: the next cycle
        it leads resumes from the store, after the newest step the last leader wrote, with
        the store's rows as the dedup base (no step read twice, none left out)."""
        self._resumed = False
        self.xids = LastXidTracker()
        self.ingestor.forget_all()
        self.status = SourceStatus(following=following)

    def resume_at(self, cursor: datetime) -> None:
        """Start reading after ``cursor`` (the first-start history ends there)."""
        self.status.cursor, self._resumed = cursor, True

    async def run_cycle(self) -> CycleReport | None:
        """Read and write the steps due; SourceError when the source failed."""
        if self.status.waiting_for is not None:
            return None
        if not self._resumed:
            self.status.cursor = await self.db.run(newest_sample_at, self.db,
                                                   self.ingestor.source)
            self._resumed = True
        now = self.clock()
        c = self.config
        window = next_window(self.status.cursor, now, step=self.step,
                             lag=timedelta(seconds=c.lag),
                             max_catchup=timedelta(seconds=c.max_catchup))
        if window is None:
            return None
        self._note_skipped(window)
        report = CycleReport()
        try:
            for start, end in chunks(window.start, window.end, self.step, c.max_points):
                await self._chunk(start, end, report)
                self.status.cursor = end
        except SourceError as exc:
            self._failed(now, exc)
            raise
        self._succeeded(now, report)
        return report

    async def _chunk(self, start: datetime, end: datetime, report: CycleReport) -> None:
        stats = QueryStats()
        by_name = await self._query(start, end, stats)
        acc, xids = self._assemble(by_name)
        if self.metrics is not None:
            self.metrics.points.inc(stats.points)
            self.metrics.series.set(stats.series)
            self.metrics.count_dropped(acc.dropped)
        for at, results in step_results(acc, self.ms, xids, self._target, acc.tenants):
            step_report = await self.ingestor.ingest(results)
            report.add(step_report)
            for result in results:
                self.status.seen[result.target.node_id] = (result, at)
            if self.metrics is not None:
                self.metrics.cards.set(step_report.cards)
        if self.metrics is not None:
            self.metrics.steps.inc((end - start) // self.step + 1)
            self.metrics.last_step.set(end.timestamp())
        self.ingestor.evict_idle(end)
        self.xids.evict(end, self.forget_after)
        self.status.seen = {n: v for n, v in self.status.seen.items()
                            if end - v[1] <= self.forget_after}

    async def _query(self, start: datetime, end: datetime,
                     stats: QueryStats) -> dict[str, list[Any]]:
        if self._session is None:
            raise SourceError("the Prometheus source is not open", reason="bad_response")
        limits = QueryLimits(self.step, 4, self.config.max_response_bytes,
                             self.config.max_series)
        observe = None if self.metrics is None else self.metrics.query_duration.observe
        querier = RangeQuerier(self._session, self.config.url, limits, stats, observe)
        names = self.ms.query_names()
        results = await asyncio.gather(*(
            querier.query_range(selector_query(name, self.config.selector), start, end)
            for name in names))
        return dict(zip(names, results, strict=True))

    def _assemble(self, by_name: dict[str, list[Any]]) -> tuple[Assembly, XidReadings]:
        ms = self.ms
        indexes = index_map(ms, by_name[ms.info_metric], None) if ms.info_metric else {}
        acc = Assembly()
        for name in ms.metric_names():
            if name != ms.info_metric:
                add_series(acc, ms, name, by_name[name], None, indexes)
        xids = (xid_readings(self.xids, acc, ms, by_name[ms.xid_metric], None, indexes)
                if ms.xid_metric else {})
        if ms.sxid_metric:
            add_sxids(acc, ms, by_name[ms.sxid_metric], None)
        return acc, xids

    def _note_skipped(self, window: Window) -> None:
        if window.skipped is None:
            return
        first, last = window.skipped
        n = (last - first) // self.step + 1
        log.warning("Prometheus source: %d step(s) from %s to %s are older than max_catchup "
                    "(%gs) and are not read: they stay a gap", n, first.isoformat(),
                    last.isoformat(), self.config.max_catchup)
        if self.metrics is not None:
            self.metrics.skipped.inc(n)

    def _failed(self, now: datetime, exc: SourceError) -> None:
        if not self.status.failing:
            log.warning("Prometheus source failing (%s): %s", exc.reason, exc)
        self.status.failing = True
        self.status.last_error = (now, exc.reason, str(exc))
        if self.metrics is not None:
            self.metrics.errors.labels(exc.reason).inc()

    def _succeeded(self, now: datetime, report: CycleReport) -> None:
        if self.status.failing:
            log.info("Prometheus source answering again; read up to %s",
                     self.status.cursor.isoformat() if self.status.cursor else "-")
        self.status.failing = False
        self.status.last_success = now
        self.status.last_report = report
        if self.metrics is not None:
            self.metrics.last_success.set(now.timestamp())

    def not_ready(self) -> str | None:
        """Why /readyz fails because of the source (None: fine)."""
        s = self.status
        if s.waiting_for is not None:
            return s.waiting_for
        if s.failing and s.last_error is not None:
            when, reason, message = s.last_error
            return f"the Prometheus source failed at {when.isoformat()} ({reason}): {message}"
        return None

    def target_view(self) -> tuple[list[Target], dict[str, ScrapeResult]]:
        """Each node seen lately as a target with its latest step (``absent`` when it had no
        reading at the newest step read)."""
        cursor = self.status.cursor
        listed: list[Target] = []
        results: dict[str, ScrapeResult] = {}
        for _, (result, at) in sorted(self.status.seen.items()):
            listed.append(result.target)
            results[result.target.url] = result if at == cursor else replace(
                result, error_reason="absent",
                error=f"no reading at the newest step read; last at {at.isoformat()}")
        return listed, results

    def describe(self) -> dict[str, Any]:
        """The source's state for ``/targets`` (never the credentials)."""
        s, c = self.status, self.config
        report = s.last_report
        return {
            "kind": "prometheus", "url": c.url, "metrics": c.metrics, "selector": c.selector,
            "step_seconds": self.step.total_seconds(), "lag_seconds": c.lag,
            "max_catchup_seconds": c.max_catchup,
            "last_step_read": _iso(s.cursor), "last_success": _iso(s.last_success),
            "failing": s.failing, "waiting_for": s.waiting_for,
            "read_by": "the leader (this evaluator follows)" if s.following
            else "this evaluator",
            "last_error": None if s.last_error is None else {
                "at": s.last_error[0].isoformat(), "reason": s.last_error[1],
                "message": s.last_error[2]},
            "last_cycle": None if report is None else {
                "cards": report.cards, "rows_written": report.rows_written,
                "xid_rows_written": report.xid_rows_written,
                "sxid_rows_written": report.sxid_rows_written},
        }

    def present_nodes(self, within: timedelta = timedelta(minutes=10)) -> set[str] | None:
        """Nodes with a reading in the last ``within`` of data read (None: nothing read yet)."""
        cursor = self.status.cursor
        if cursor is None or self.status.last_success is None:
            return None
        return {n for n, (_, at) in self.status.seen.items() if cursor - at <= within}


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()
