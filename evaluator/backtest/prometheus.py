"""Import history from a Prometheus server: ``/api/v1/query_range``, chunked, into the store.

The step is the scrape interval, so the readings are the ones a live evaluator would have
scraped. Prometheus refuses a range query of more than 11,000 points per series (HTTP 400,
``bad_data``, "exceeded maximum resolution of 11,000 points per timeseries", captured from
2.42.0); the period is cut into chunks of at most ``max_points`` steps (10,000) and a chunk that
is still refused is split in half and retried. The first step is read plainly; after it, each
chunk's *change points* (:mod:`evaluator.ingest.prometheus.changes`: where a series changes,
appears or ends between consecutive steps), all metrics of one chunk concurrently, in time order,
fed through the live write rule (:class:`ReadingWriter`) with the keep-alive readings in between:
the same rows as reading every step, at a fraction of the points (measured in
``bench/prometheus_source.py``).

A step at which Prometheus has no value for a series (no sample within its lookback, 5 minutes
by default, or the series went stale) gives no reading: a gap stays a gap, never a zero.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from evaluator.backtest.history import ReadingWriter, keepalive_period
from evaluator.ingest.prometheus.changes import ChangeTracker, change_query
from evaluator.ingest.prometheus.metricsets import DEFAULT_MAX_POINTS, MetricSet, index_map
from evaluator.ingest.prometheus.query import QueryLimits, QueryStats, RangeQuerier, chunks
from evaluator.ingest.prometheus.window import aligned
from evaluator.outbound import ClientOptions, client_session
from evaluator.store.db import Database

log = logging.getLogger(__name__)

CONCURRENCY = 4
__all__ = ["PrometheusImport", "PrometheusSource", "aligned", "chunks", "import_prometheus"]


@dataclass(frozen=True, slots=True)
class PrometheusSource:
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
    cards: set[tuple[str, int]] = field(default_factory=set)
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return self.query.requests

    @property
    def splits(self) -> int:
        return self.query.splits


def selector_query(metric: str, selector: str) -> str:
    return f"{metric}{{{selector}}}" if selector else metric


async def import_prometheus(db: Database, source: PrometheusSource, keepalive: timedelta,
                            progress: Callable[[int, int], None] | None = None
                            ) -> PrometheusImport:
    """Read the first step plainly, then every chunk's change points in time order, into
    ``db`` through the write rule (``ReadingWriter``: changes plus the keep-alive readings in
    between)."""
    stats = PrometheusImport()
    writer = ReadingWriter.open(db, keepalive)
    period = keepalive_period(source.step, keepalive)
    tracker = ChangeTracker(source.metrics, source.node_label)
    indexes: dict[tuple[str, str], int] = {}
    pieces = chunks(source.since, source.until, source.step, source.max_points)
    async with client_session(_options(source)) as session:
        client = RangeQuerier(session, source.url, QueryLimits(source.step, CONCURRENCY),
                              stats.query)
        first = await _read(client, source, source.since, source.since, plain=True)
        _apply(writer, tracker, first, source, indexes, stats, period)
        reads = [(max(start, source.since + source.step), end) for start, end in pieces]
        # The next chunk is asked for while this one is folded and written (the server and
        # this process work at the same time).
        ahead = _prefetch(client, source, reads[0])
        try:
            for done, (_, end) in enumerate(reads, start=1):
                by_name = await ahead
                if done < len(reads):
                    ahead = _prefetch(client, source, reads[done])
                _apply(writer, tracker, by_name, source, indexes, stats, period)
                writer.hold_all(end + source.step, period)
                await db.run(writer.flush)
                if progress is not None:
                    progress(done, len(pieces))
        finally:
            ahead.cancel()  # a failed chunk: the one asked for ahead is not wanted
    stats.readings = writer.seen
    stats.dropped = dict(tracker.dropped)
    log.info("imported %d change points of %d cards from %s (%d requests, %d splits): %d rows",
             stats.changes, len(stats.cards), source.url, stats.requests, stats.splits,
             writer.written)
    return stats


def _prefetch(client: RangeQuerier, source: PrometheusSource,
              piece: tuple[datetime, datetime]) -> asyncio.Task[dict[str, list[Any]]]:
    start, end = piece
    if start > end:  # a one-step import: the plain first step was all
        return asyncio.ensure_future(_empty(source))
    return asyncio.ensure_future(_read(client, source, start, end, plain=False))


async def _empty(source: PrometheusSource) -> dict[str, list[Any]]:
    return {name: [] for name in source.metrics.metric_names()}


def _options(source: PrometheusSource) -> ClientOptions:
    base = source.client or ClientOptions()
    return ClientOptions(total_timeout=source.timeout, connect_timeout=source.timeout,
                         max_connections=CONCURRENCY, headers=base.headers,
                         bearer_token=base.bearer_token, basic_auth=base.basic_auth,
                         ca_file=base.ca_file, insecure_skip_verify=base.insecure_skip_verify)


async def _read(client: RangeQuerier, source: PrometheusSource, start: datetime,
                end: datetime, *, plain: bool) -> dict[str, list[Any]]:
    names = source.metrics.metric_names()
    queries = [selector_query(n, source.selector) if plain
               else change_query(n, source.selector, source.step) for n in names]
    results = await asyncio.gather(*(client.query_range(q, start, end) for q in queries))
    return dict(zip(names, results, strict=True))


def _apply(writer: ReadingWriter, tracker: ChangeTracker, by_name: dict[str, list[Any]],
           source: PrometheusSource, indexes: dict[tuple[str, str], int],
           stats: PrometheusImport, period: timedelta) -> None:
    ms = source.metrics
    if ms.info_metric:
        indexes.update(index_map(ms, by_name[ms.info_metric], source.node_label))
    counters = {n: series for n, series in by_name.items() if n != ms.info_metric}
    stats.series += sum(len(series) for series in counters.values())
    for key, at, reading in tracker.fold(counters, indexes):
        stats.changes += 1
        stats.cards.add((key.node_id, key.gpu_index))
        writer.change(key, at, reading, period)
