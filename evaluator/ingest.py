"""One ingest cycle: scraped cards -> write rule with the dedup cache -> one batched write.

Per cycle the store sees at most:
- one SELECT, for every card the cache missed (``latest_rows`` with all their keys, reading
  only rows young enough to matter to the write rule), and
- one write (one INSERT of all rows to write, plus the node upsert in the same transaction when a
  node is new, changed tenant/target, or its ``last_seen`` is a keepalive period old).
With unchanged counters and a warm cache that is zero statements.

The cache is filled only with rows the store reported: the SELECT's result, and the rows of a
batch after its INSERT returned. A failed SELECT or INSERT raises out of :meth:`Ingestor.ingest`
(the loop's catch-all counts it); the cache then still holds the last confirmed rows, so the
next cycle simply re-decides against them and nothing scraped twice is lost for good.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from evaluator.dedup import DedupCache
from evaluator.ingest_rule import Reason, decide
from evaluator.model import CardKey, Sample
from evaluator.scrape import ScrapeResult
from evaluator.selfmetrics import SelfMetrics
from evaluator.store.cycles import write_cycle
from evaluator.store.db import Database
from evaluator.store.maintenance import NodeRecord
from evaluator.store.samples import latest_rows
from gpu_health.contract import SOURCE_REAL

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
    decisions: Counter[str] = field(default_factory=Counter)


class Ingestor:
    """Applies the write rule to scrape results and writes the survivors in one batch."""

    def __init__(self, db: Database, cache: DedupCache, *, keepalive: timedelta,
                 metrics: SelfMetrics | None = None,
                 on_written: Callable[[int], None] | None = None) -> None:
        self.db = db
        self.cache = cache
        self.keepalive = keepalive
        self.metrics = metrics
        self.on_written = on_written  # called with the number of real rows after each commit
        self._nodes: dict[str, NodeRecord] = {}  # as last written to gpu_health_nodes

    async def ingest(self, results: Sequence[ScrapeResult]) -> CycleReport:
        report = CycleReport(targets=len(results))
        readings = self._readings(results, report)
        to_write: list[Sample] = []
        missed: list[Sample] = []
        for key, sample in readings.items():
            cached = self.cache.get(key, sample.sampled_at)
            if cached is None:
                missed.append(sample)
            else:
                report.hits += 1
                self._decide(sample, cached, to_write, report)
        report.misses = len(missed)
        if missed:
            report.selects = 1
            # Rows older than the keepalive cannot stop a write, so the lookup skips them.
            since = min(s.sampled_at for s in missed) - self.keepalive
            stored = await self.db.run(latest_rows, self.db, [s.key for s in missed], since)
            for sample in missed:
                row = stored.get(sample.key)
                if row is not None:
                    self.cache.confirm(row, sample.sampled_at)
                self._decide(sample, row, to_write, report)
        nodes = self._nodes_due(results)
        if to_write or nodes:
            await self.db.run(write_cycle, self.db, to_write, nodes)
            for row in to_write:
                self.cache.confirm(row, row.sampled_at)
            self._nodes.update((n.node_id, n) for n in nodes)
            report.rows_written = len(to_write)
            report.nodes_written = len(nodes)
            if self.on_written is not None and to_write:
                self.on_written(len(to_write))
        self._count(report)
        return report

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
                key = CardKey(node, card.gpu_index, SOURCE_REAL)
                readings[key] = Sample(key, card.gpu_uuid, result.scraped_at, card.counters)
        return readings

    def _decide(self, sample: Sample, latest: Sample | None, to_write: list[Sample],
                report: CycleReport) -> None:
        decision = decide(sample, latest, self.keepalive)
        report.decisions[decision.reason] += 1
        if decision.write:
            to_write.append(sample)

    def _nodes_due(self, results: Sequence[ScrapeResult]) -> list[NodeRecord]:
        """Node records to (re)write: new, changed, or last_seen a keepalive period old."""
        due: dict[str, NodeRecord] = {}
        for result in results:
            if not result.ok:
                continue
            t = result.target
            known = self._nodes.get(t.node_id)
            if (
                known is None or known.tenant != t.tenant or known.target != t.url
                or result.scraped_at - known.last_seen >= self.keepalive
            ):
                due[t.node_id] = NodeRecord(t.node_id, t.tenant, t.url, result.scraped_at)
        return list(due.values())

    def evict_idle(self, now: datetime) -> int:
        return self.cache.evict_idle(now)

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
            m.rows_written.labels(SOURCE_REAL).inc(report.rows_written)
        m.cache_entries.set(len(self.cache))
