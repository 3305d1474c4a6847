"""One ingest cycle: scraped cards -> write rule with the dedup cache -> one batched write.

Per cycle the store sees at most:
- one SELECT, for every card the cache missed (``latest_rows`` with all their keys, reading
  only rows young enough to matter to the write rule);
- one SELECT for every XID series (card, XID code) the XID cache missed (``latest_xid_rows``),
  and one for every NVSwitch SXid series the SXid cache missed (``latest_sxid_rows``);
- one write (one INSERT of all sample rows, one of all XID rows, one of all SXid rows, plus the
  node upsert, in one transaction when there is more than one statement: see
  ``store/readings/cycles.py``).
With unchanged counters and a warm cache that is zero statements.

XID counts are written for every card that exports them, also when its five counters are all
unknown (those cards get no ``gpu_health_samples`` row, as before): a known XID count is data.
XID write decisions are counted in ``write_decisions_total`` with ``xid_*`` reasons. A node's
SXid counts (a switch is not a card) are written the same way, ``sxid_*`` reasons.

The cache is filled only with rows the store reported: the SELECT's result, and the rows of a
batch after its INSERT returned. A failed SELECT or INSERT raises out of :meth:`Ingestor.ingest`
(the loop's catch-all counts it); the cache then still holds the last confirmed rows, so the
next cycle simply re-decides against them and nothing scraped twice is lost for good.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.ingest.dedup import (
    Chosen,
    DedupCache,
    K,
    R,
    RowCache,
    SxidDedupCache,
    XidDedupCache,
    rows_to_write,
)
from gpu_health.evaluator.ingest.scrape import ScrapeResult
from gpu_health.evaluator.ingest.write_rule import (
    Reason,
    WriteDecision,
    decide,
    sxid_decision,
    xid_decision,
)
from gpu_health.evaluator.model import CardKey, Sample, SxidKey, SxidSample, XidKey, XidSample
from gpu_health.evaluator.selfmetrics import SelfMetrics
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.cycles import write_cycle
from gpu_health.evaluator.store.readings.maintenance import NodeRecord
from gpu_health.evaluator.store.readings.samples import latest_rows
from gpu_health.evaluator.store.readings.sxid_samples import latest_sxid_rows
from gpu_health.evaluator.store.readings.xid_samples import latest_xid_rows

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CycleReport:
    """What one cycle did (also what the benchmark prints)."""

    targets: int = 0
    targets_up: int = 0
    cards: int = 0
    hits: int = 0
    misses: int = 0
    selects: int = 0
    rows_written: int = 0
    nodes_written: int = 0
    xid_series: int = 0
    xid_hits: int = 0
    xid_misses: int = 0
    xid_rows_written: int = 0
    sxid_series: int = 0
    sxid_rows_written: int = 0
    decisions: Counter[str] = field(default_factory=Counter)

    def add(self, step: CycleReport) -> None:
        """Sum in one step of a multi-step cycle (sizes are the largest step's)."""
        self.targets = max(self.targets, step.targets)
        self.targets_up = max(self.targets_up, step.targets_up)
        self.cards = max(self.cards, step.cards)
        self.hits += step.hits
        self.misses += step.misses
        self.selects += step.selects
        self.rows_written += step.rows_written
        self.nodes_written += step.nodes_written
        self.xid_series = max(self.xid_series, step.xid_series)
        self.xid_rows_written += step.xid_rows_written
        self.sxid_series = max(self.sxid_series, step.sxid_series)
        self.sxid_rows_written += step.sxid_rows_written
        self.decisions.update(step.decisions)


class Ingestor:
    """Applies the write rule to scrape results and writes the survivors in one batch."""

    def __init__(self, db: Database, cache: DedupCache, *, keepalive: timedelta,
                 metrics: SelfMetrics | None = None,
                 on_written: Callable[[int], None] | None = None,
                 xid_cache: XidDedupCache | None = None, source: str = SOURCE_REAL,
                 sxid_cache: SxidDedupCache | None = None) -> None:
        self.db = db
        self.source = source  # 'real' except in the demo driven by fake vendor tools
        self.cache = cache
        self.xid_cache = XidDedupCache.sized_for(cache) if xid_cache is None else xid_cache
        self.sxid_cache = SxidDedupCache.sized_for(cache) if sxid_cache is None else sxid_cache
        self.keepalive = keepalive
        self.metrics = metrics
        self.on_written = on_written  # called with the number of real rows after each commit
        self._nodes: dict[str, NodeRecord] = {}  # as last written to gpu_health_nodes

    async def ingest(self, results: Sequence[ScrapeResult]) -> CycleReport:
        report = CycleReport(targets=len(results))
        xids = await self._xids_to_write(_xid_readings(results, self.source), report)
        sxids = await self._sxids_to_write(_sxid_readings(results, self.source), report)
        to_write = await self._samples_to_write(self._readings(results, report), report)
        nodes = self._nodes_due(results)
        if to_write or nodes or xids or sxids:
            await self.db.run(write_cycle, self.db, to_write, nodes, xids, sxids)
            for row in to_write:
                self.cache.confirm(row, row.sampled_at)
            for xid_row in xids:
                self.xid_cache.confirm(xid_row, xid_row.sampled_at)
            for sxid_row in sxids:
                self.sxid_cache.confirm(sxid_row, sxid_row.sampled_at)
            self._nodes.update((n.node_id, n) for n in nodes)
            report.rows_written = len(to_write)
            report.nodes_written = len(nodes)
            report.xid_rows_written = len(xids)
            report.sxid_rows_written = len(sxids)
            if self.on_written is not None and to_write:
                self.on_written(len(to_write))
        self._count(report)
        return report

    async def _samples_to_write(self, readings: dict[CardKey, Sample],
                                report: CycleReport) -> list[Sample]:
        """The sample rows the write rule keeps; at most one SELECT for all cache misses."""

        async def lookup(missed: Sequence[Sample]) -> Mapping[CardKey, Sample]:
            # Rows older than the keepalive cannot stop a write, so the lookup skips them.
            since = min(s.sampled_at for s in missed) - self.keepalive
            return await self.db.run(latest_rows, self.db, [s.key for s in missed], since)

        chosen = await rows_to_write(list(readings.values()), self.cache, lookup,
                                     partial(decide, keepalive=self.keepalive), report.decisions)
        report.hits, report.misses = chosen.hits, chosen.misses
        report.selects += chosen.selects
        return chosen.rows

    async def _xids_to_write(self, scraped: list[XidSample],
                             report: CycleReport) -> list[XidSample]:
        """The XID rows the write rule keeps."""
        report.xid_series = len(scraped)
        chosen = await self._counts_to_write(scraped, self.xid_cache, latest_xid_rows,
                                             xid_decision, report)
        report.xid_hits, report.xid_misses = chosen.hits, chosen.misses
        return chosen.rows

    async def _sxids_to_write(self, scraped: list[SxidSample],
                              report: CycleReport) -> list[SxidSample]:
        """The SXid rows the write rule keeps."""
        report.sxid_series = len(scraped)
        chosen = await self._counts_to_write(scraped, self.sxid_cache, latest_sxid_rows,
                                             sxid_decision, report)
        return chosen.rows

    async def _counts_to_write(
            self, scraped: list[R], cache: RowCache[K, R],
            latest: Callable[[Database, list[K]], Mapping[K, R]],
            rule: Callable[[R, R | None], WriteDecision], report: CycleReport) -> Chosen[R]:
        """The count rows (XID or SXid) ``rule`` keeps against their cache; at most one SELECT
        for all cache misses."""

        async def lookup(missed: Sequence[R]) -> Mapping[K, R]:
            return await self.db.run(latest, self.db, [r.key for r in missed])

        chosen = await rows_to_write(scraped, cache, lookup, rule, report.decisions)
        report.selects += chosen.selects
        return chosen

    def _readings(self, results: Sequence[ScrapeResult], report: CycleReport) -> dict[
            CardKey, Sample]:
        readings: dict[CardKey, Sample] = {}
        for result in results:
            if not result.ok:
                continue
            report.targets_up += 1
            node = result.target.node_id
            for card in result.extraction.cards:
                report.cards += 1
                if card.counters.all_unknown():
                    # Dropped before any DB access, as the reference requires.
                    report.decisions[Reason.ALL_UNKNOWN] += 1
                    continue
                key = CardKey(node, card.gpu_index, self.source)
                readings[key] = Sample(key, card.gpu_uuid, result.scraped_at, card.counters,
                                       card.details)
        return readings

    def _nodes_due(self, results: Sequence[ScrapeResult]) -> list[NodeRecord]:
        """Node records to (re)write: new, changed (tenant, target, listed-card count), or
        last_seen a keepalive period old."""
        due: dict[str, NodeRecord] = {}
        for result in results:
            if not result.ok:
                continue
            t = result.target
            known = self._nodes.get(t.node_id)
            listed = len(result.extraction.cards)  # all-unknown cards too: the UI's count
            if (
                known is None or known.tenant != t.tenant or known.target != t.url
                or known.listed_cards != listed
                or result.scraped_at - known.last_seen >= self.keepalive
            ):
                due[t.node_id] = NodeRecord(t.node_id, t.tenant, t.url, result.scraped_at,
                                            listed, self.source)
        return list(due.values())

    def evict_idle(self, now: datetime) -> int:
        return (self.cache.evict_idle(now) + self.xid_cache.evict_idle(now)
                + self.sxid_cache.evict_idle(now))

    def forget_nodes(self, nodes: set[str]) -> None:
        """Drop what is remembered of these nodes (cached rows, node records): another
        evaluator scraped them meanwhile, so the next decision reads the store again."""
        self.cache.forget_where(lambda key: key.node_id in nodes)
        self.xid_cache.forget_where(lambda key: key.node_id in nodes)
        self.sxid_cache.forget_where(lambda key: key.node_id in nodes)
        for node in nodes:
            self._nodes.pop(node, None)

    def forget_all(self) -> None:
        """Drop everything remembered: another evaluator wrote meanwhile (a new leader of a
        Prometheus source), so every decision reads the store again."""
        self.cache.forget_where(lambda _: True)
        self.xid_cache.forget_where(lambda _: True)
        self.sxid_cache.forget_where(lambda _: True)
        self._nodes.clear()

    def _count(self, report: CycleReport) -> None:
        m = self.metrics
        if m is None:
            return
        m.count(m.decisions, report.decisions)
        if report.hits:
            m.cache_hits.inc(report.hits)
        if report.misses:
            m.cache_misses.inc(report.misses)
        if report.rows_written:
            m.rows_written.labels(self.source).inc(report.rows_written)
        m.cache_entries.set(len(self.cache))


def _xid_readings(results: Sequence[ScrapeResult], source: str) -> list[XidSample]:
    """Every known XID count of every card of the targets that answered."""
    rows: list[XidSample] = []
    for result in results:
        if not result.ok:
            continue
        node = result.target.node_id
        for card in result.extraction.cards:
            rows += [XidSample(XidKey(node, card.gpu_index, source, xid), card.gpu_uuid,
                               result.scraped_at, count) for xid, count in card.xids]
    return rows


def _sxid_readings(results: Sequence[ScrapeResult], source: str) -> list[SxidSample]:
    """Every known SXid count of the targets that answered (a node's, not a card's)."""
    return [SxidSample(SxidKey(r.target.node_id, source, *series), r.scraped_at, count)
            for r in results if r.ok for series, count in r.extraction.sxids]
