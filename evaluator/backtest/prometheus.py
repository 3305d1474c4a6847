"""Import history from a Prometheus server: ``/api/v1/query_range``, chunked, into the store.

The step is the scrape interval, so the readings are the ones a live evaluator would have
scraped. Prometheus refuses a range query of more than 11,000 points per series (HTTP 400,
``bad_data``, "exceeded maximum resolution of 11,000 points per timeseries", captured from
2.42.0); the period is cut into chunks of at most ``max_points`` steps (10,000) and a chunk that
is still refused is split in half and retried. Chunks are read in time order, all metrics of one
chunk concurrently, and fed through the live write rule (:class:`ReadingWriter`) card by card.

A step at which Prometheus has no value for a series (no sample within its lookback, 5 minutes
by default, or the series went stale) gives no reading: a gap stays a gap, never a zero.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import aiohttp

from evaluator.backtest.history import ReadingWriter
from evaluator.backtest.metricsets import (
    DEFAULT_MAX_POINTS,
    Assembly,
    MetricSet,
    add_series,
    index_map,
    readings,
)
from evaluator.outbound import ClientOptions, client_session
from evaluator.store.db import Database
from gpu_health.errors import BacktestError

log = logging.getLogger(__name__)

CONCURRENCY: Final = 4


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


@dataclass(slots=True)
class PrometheusImport:
    requests: int = 0
    splits: int = 0
    series: int = 0
    readings: int = 0
    cards: set[tuple[str, int]] = field(default_factory=set)
    dropped: dict[str, int] = field(default_factory=dict)


def chunks(since: datetime, until: datetime, step: timedelta,
           points: int) -> list[tuple[datetime, datetime]]:
    """``[start, end]`` pieces of at most ``points`` steps each, on the grid from ``since``."""
    result = []
    start = since
    while start <= until:
        end = min(until, start + (points - 1) * step)
        result.append((start, end))
        start = end + step
    return result


def _is_resolution_error(status: int, body: Any) -> bool:
    return (status == 400 and isinstance(body, dict) and body.get("errorType") == "bad_data"
            and "maximum resolution" in str(body.get("error", "")))


class PrometheusClient:
    def __init__(self, session: aiohttp.ClientSession, source: PrometheusSource,
                 stats: PrometheusImport) -> None:
        self.session = session
        self.source = source
        self.stats = stats
        self._limit = asyncio.Semaphore(CONCURRENCY)

    async def query_range(self, query: str, start: datetime, end: datetime) -> list[Any]:
        """The matrix of ``query`` over ``[start, end]``, splitting on the resolution error."""
        step = self.source.step
        status, body = await self._get(query, start, end)
        if _is_resolution_error(status, body):
            if start >= end:
                raise BacktestError(f"Prometheus refused even one step of {query!r}: "
                                    f"{body.get('error')}")
            self.stats.splits += 1
            mid = start + ((end - start) // step // 2) * step
            return [*await self.query_range(query, start, mid),
                    *await self.query_range(query, mid + step, end)]
        if status != 200 or not isinstance(body, dict) or body.get("status") != "success":
            detail = (f"{body.get('errorType')}: {body.get('error')}" if isinstance(body, dict)
                      else str(body)[:200])
            raise BacktestError(f"Prometheus {self.source.url} answered {status} to "
                                f"query_range {query!r}: {detail}")
        data = body.get("data") or {}
        if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise BacktestError(f"Prometheus answered query_range {query!r} with "
                                f"{data.get('resultType')!r}, not a matrix")
        return list(data["result"])

    async def _get(self, query: str, start: datetime, end: datetime) -> tuple[int, Any]:
        params = {"query": query, "start": f"{start.timestamp():.3f}",
                  "end": f"{end.timestamp():.3f}",
                  "step": f"{self.source.step.total_seconds():g}"}
        url = self.source.url.rstrip("/") + "/api/v1/query_range"
        async with self._limit:
            self.stats.requests += 1
            try:
                async with self.session.get(url, params=params) as response:
                    text = await response.text()
                    status = response.status
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise BacktestError(f"cannot query Prometheus at {self.source.url}: "
                                    f"{type(exc).__name__}: {exc}") from exc
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text


def _query(source: PrometheusSource, metric: str) -> str:
    return f"{metric}{{{source.selector}}}" if source.selector else metric


async def import_prometheus(db: Database, source: PrometheusSource, keepalive: timedelta,
                            progress: Callable[[int, int], None] | None = None
                            ) -> PrometheusImport:
    """Read every chunk, in time order, into ``db`` through the write rule."""
    stats = PrometheusImport()
    writer = ReadingWriter.open(db, keepalive)
    pieces = chunks(source.since, source.until, source.step, source.max_points)
    ms = source.metrics
    options = ClientOptions(total_timeout=source.timeout, connect_timeout=source.timeout,
                            max_connections=CONCURRENCY)
    async with client_session(options) as session:
        client = PrometheusClient(session, source, stats)
        for done, (start, end) in enumerate(pieces, start=1):
            names = ms.metric_names()
            results = await asyncio.gather(*(client.query_range(_query(source, name), start, end)
                                             for name in names))
            by_name = dict(zip(names, results, strict=True))
            indexes = (index_map(ms, by_name[ms.info_metric], source.node_label)
                       if ms.info_metric else {})
            acc = Assembly()
            for name in names:
                if name != ms.info_metric:
                    add_series(acc, ms, name, by_name[name], source.node_label, indexes)
            _feed(writer, acc, ms, stats)
            await db.run(writer.flush)
            if progress is not None:
                progress(done, len(pieces))
    log.info("imported %d readings of %d cards from %s (%d requests, %d splits): %d rows",
             stats.readings, len(stats.cards), source.url, stats.requests, stats.splits,
             writer.written)
    return stats


def _feed(writer: ReadingWriter, acc: Assembly, ms: MetricSet, stats: PrometheusImport) -> None:
    stats.series += acc.series
    for reason, n in acc.dropped.items():
        stats.dropped[reason] = stats.dropped.get(reason, 0) + n
    for key, uuid, at, counters in readings(acc, ms):
        stats.readings += 1
        stats.cards.add((key.node_id, key.gpu_index))
        writer.add(key, uuid, at, counters)


def aligned(at: datetime, step: timedelta) -> datetime:
    """``at`` rounded up onto the ``step`` grid from the Unix epoch."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    n = -(-(at - epoch) // step)
    return epoch + n * step
