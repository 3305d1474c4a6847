"""Import history from a Prometheus server: ``/api/v1/query_range``, chunked, into the store.

The step is the scrape interval, so the readings are the ones a live evaluator would have
scraped. Prometheus refuses a range query of more than 11,000 points per series (HTTP 400,
``bad_data``, "exceeded maximum resolution of 11,000 points per timeseries", captured from
2.42.0); the period is cut into chunks of at most ``max_points`` steps (10,000) and a chunk that
is still refused is split in half and retried. The first step is read plainly; after it, each
chunk's *change points* (:mod:`gpu_health.evaluator.ingest.prometheus.changes`: where a series
changes, appears or ends between consecutive steps), all metrics of one chunk concurrently, in time
order, fed through the live write rule (:class:`ReadingWriter`) with the keep-alive readings in
between: the same rows as reading every step, at a fraction of the points (measured in
``bench/prometheus_source.py``).

XID counts come the same way: change points of the set's XID metric, counts (or dcgm's gauge
through :class:`~gpu_health.evaluator.ingest.prometheus.xids.LastXidTracker`) through the XID write
rule; so do a node's NVSwitch SXid counts (our exporter's only), through the SXid write rule.

A step at which Prometheus has no value for a series (no sample within its lookback, 5 minutes
by default, or the series went stale) gives no reading: a gap stays a gap, never a zero.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.backtest.history import ReadingWriter
from gpu_health.evaluator.ingest.prometheus.assembly import Assembly
from gpu_health.evaluator.ingest.prometheus.changes import GONE, ChangeTracker, change_query
from gpu_health.evaluator.ingest.prometheus.metricsets import (
    DEFAULT_MAX_POINTS,
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
from gpu_health.evaluator.ingest.prometheus.sxids import add_sxids
from gpu_health.evaluator.ingest.prometheus.window import aligned
from gpu_health.evaluator.ingest.prometheus.xids import LastXidTracker, xid_readings
from gpu_health.evaluator.model import CardSlot, SxidKey, SxidSample, XidKey, XidSample
from gpu_health.evaluator.outbound import ClientOptions, client_session
from gpu_health.evaluator.store.db import Database

log = logging.getLogger(__name__)

CONCURRENCY = 4
__all__ = ["PrometheusImport", "PrometheusRange", "aligned", "chunks", "import_prometheus"]


@dataclass(frozen=True, slots=True)
class PrometheusRange:
    """What to import from a Prometheus-compatible server: its URL, the metric set and the
    range read at ``step`` (the live source that reads the newest step every minute is
    :class:`gpu_health.evaluator.ingest.prometheus.source.PrometheusSource`)."""

    url: str
    metrics: MetricSet
    since: datetime
    until: datetime
    step: timedelta
    node_label: str | None = None
    selector: str = ""  # extra label matchers, e.g. job="dcgm"
    timeout: float = 120.0
    max_points: int = DEFAULT_MAX_POINTS
    client: ClientOptions | None = None  # auth and TLS (the live source's); None: defaults


@dataclass(slots=True)
class PrometheusImport:
    query: QueryStats = field(default_factory=QueryStats)
    series: int = 0
    readings: int = 0  # fed to the write rule: change points and keep-alive readings
    changes: int = 0  # change points read
    cards: set[CardSlot] = field(default_factory=set)
    dropped: Counter[str] = field(default_factory=Counter)  # values unread, by reason
    absent: Counter[str] = field(default_factory=Counter)  # change points without a counter

    def unread(self) -> str:
        """One sentence on what could not be read (empty when everything was)."""
        parts = [f"{key}: no value at {n} of {self.changes} change points" for key, n in
                 sorted(self.absent.items())]
        parts += [f"{n} values unusable ({reason})" for reason, n in sorted(self.dropped.items())]
        return "; ".join(parts)

    @property
    def requests(self) -> int:
        return self.query.requests

    @property
    def splits(self) -> int:
        return self.query.splits


async def import_prometheus(db: Database, source: PrometheusRange, keepalive: timedelta,
                            progress: Callable[[int, int], None] | None = None
                            ) -> PrometheusImport:
    """Read the first step plainly, then every chunk's change points in time order, into
    ``db`` through the write rule (``ReadingWriter``: changes plus the keep-alive readings in
    between)."""
    stats = PrometheusImport()
    writer = ReadingWriter.open(db, keepalive, source.step)
    state = _State(source, writer, stats, ChangeTracker(source.metrics, source.node_label))
    pieces = chunks(source.since, source.until, source.step, source.max_points)
    async with client_session(_options(source)) as session:
        client = RangeQuerier(session, source.url, QueryLimits(source.step, CONCURRENCY),
                              stats.query)
        state.apply(await _first_step(client, source))
        reads = [(max(start, source.since + source.step), end) for start, end in pieces]
        # The next chunk is asked for while this one is folded and written (the server and
        # this process work at the same time).
        ahead = _prefetch(client, source, reads[0])
        try:
            for done, (_, end) in enumerate(reads, start=1):
                by_name = await ahead
                if done < len(reads):
                    ahead = _prefetch(client, source, reads[done])
                state.apply(by_name)
                writer.hold_all(end + source.step)
                await db.run(writer.flush)
                if progress is not None:
                    progress(done, len(pieces))
        finally:
            ahead.cancel()  # a failed chunk: the one asked for ahead is not wanted
    stats.readings = writer.seen
    stats.dropped.update(state.tracker.dropped)
    stats.absent.update(state.tracker.absent)
    if stats.absent or stats.dropped:
        log.warning("history import from %s could not read everything: %s", source.url,
                    stats.unread())
    log.info("imported %d change points of %d cards from %s (%d requests, %d splits): %d rows",
             stats.changes, len(stats.cards), source.url, stats.requests, stats.splits,
             writer.written)
    return stats


async def _first_step(client: RangeQuerier, source: PrometheusRange) -> dict[str, list[Any]]:
    """The plain reading at ``since``. Asked as the range ``[since, since + step]`` and cut
    back to ``since``: VictoriaMetrics (1.79, Debian's package) answers a range query ending
    where a series' first sample is (``[since, since]``, or an instant query at it) with
    nothing, as it has one raw sample to look back on, while Prometheus answers it; with the
    next step in the range it answers both. Without this, a counter whose first sample is at
    ``since`` and that never changed afterwards was never read at all."""
    by_name = await _read(client, source, source.since, source.since + source.step, plain=True)
    at = source.since.timestamp()
    for series_list in by_name.values():
        for series in series_list:
            series["values"] = [v for v in series.get("values", ()) if float(v[0]) == at]
    return {name: [s for s in series_list if s["values"]]
            for name, series_list in by_name.items()}


def _prefetch(client: RangeQuerier, source: PrometheusRange,
              piece: tuple[datetime, datetime]) -> asyncio.Task[dict[str, list[Any]]]:
    start, end = piece
    if start > end:  # a one-step import: the plain first step was all
        return asyncio.ensure_future(_empty(source))
    return asyncio.ensure_future(_read(client, source, start, end, plain=False))


async def _empty(source: PrometheusRange) -> dict[str, list[Any]]:
    return {name: [] for name in source.metrics.query_names()}


def _options(source: PrometheusRange) -> ClientOptions:
    """The source's auth and TLS with this import's timeouts and concurrency."""
    return replace(source.client or ClientOptions(), total_timeout=source.timeout,
                   connect_timeout=source.timeout, max_connections=CONCURRENCY)


async def _read(client: RangeQuerier, source: PrometheusRange, start: datetime,
                end: datetime, *, plain: bool) -> dict[str, list[Any]]:
    names = source.metrics.query_names()
    queries = [selector_query(n, source.selector) if plain
               else change_query(n, source.selector, source.step) for n in names]
    results = await asyncio.gather(*(client.query_range(q, start, end) for q in queries))
    return dict(zip(names, results, strict=True))


@dataclass(slots=True)
class _State:
    """What one import carries from chunk to chunk."""

    source: PrometheusRange
    writer: ReadingWriter
    stats: PrometheusImport
    tracker: ChangeTracker
    xids: LastXidTracker = field(default_factory=LastXidTracker)
    indexes: dict[tuple[str, str], int] = field(default_factory=dict)

    def apply(self, by_name: dict[str, list[Any]]) -> None:
        ms, stats = self.source.metrics, self.stats
        if ms.info_metric:
            self.indexes.update(index_map(ms, by_name[ms.info_metric], self.source.node_label))
        counters = {n: series for n, series in by_name.items()
                    if n not in (ms.info_metric, ms.xid_metric, ms.sxid_metric)}
        stats.series += sum(len(series) for series in counters.values())
        for key, at, reading in self.tracker.fold(counters, self.indexes):
            stats.changes += 1
            stats.cards.add((key.node_id, key.gpu_index))
            self.writer.change(key, at, reading)
        if ms.xid_metric:
            self._xids(by_name[ms.xid_metric])
        if ms.sxid_metric:
            self._sxids(by_name[ms.sxid_metric])

    def _xids(self, series: list[Any]) -> None:
        """XID rows: the counts at each change point, through the XID write rule (change-only,
        no keep-alive, so change points are all it needs). A series' end is no count."""
        ms, acc = self.source.metrics, Assembly()
        values = [s for s in series if s.get("metric", {}).get(GONE) != "1"]
        found = xid_readings(self.xids, acc, ms, values, self.source.node_label, self.indexes)
        self.stats.dropped.update(acc.dropped)
        for key, times in found.items():
            for at, (uuid, counts) in sorted(times.items()):
                for code, count in counts.items():
                    self.writer.xids.add(XidSample(
                        XidKey(key.node_id, key.gpu_index, key.source, code), uuid, at, count))

    def _sxids(self, series: list[Any]) -> None:
        """A node's NVSwitch SXid rows at their change points, through the SXid write rule."""
        acc = Assembly()
        add_sxids(acc, self.source.metrics, [s for s in series
                                             if s.get("metric", {}).get(GONE) != "1"],
                  self.source.node_label)
        self.stats.dropped.update(acc.dropped)
        for node, times in acc.sxids.items():
            for at, counts in sorted(times.items()):
                for found, count in counts.items():
                    self.writer.sxids.add(SxidSample(SxidKey(node, SOURCE_REAL, *found), at, count))
