"""Imported history -> stored rows, through the live write rule (change-only + keep-alive).

Two paths, one rule (:func:`gpu_health.evaluator.ingest.write_rule.decide`, the function live ingest
calls):

- :class:`ReadingWriter` (Prometheus import): every reading of a card goes through ``decide``
  against the card's last written row, exactly as in a scrape cycle; gaps stay gaps (no reading,
  no row). Rows are flushed in bulk
  (:func:`gpu_health.evaluator.store.readings.samples.insert_samples`). Fed only the change points
  of a history (:mod:`gpu_health.evaluator.ingest.prometheus.changes`), it keeps each card's current
  reading and :meth:`ReadingWriter.hold` feeds the readings in between that ``decide`` would write:
  while nothing changes, the first grid step at least ``keepalive`` after the last written row, i.e.
  every ``P`` (below) after it.
- :func:`keepalive_rows` / :func:`write_histories` / :func:`expand_staged` (events import,
  synthetic benchmark): a :class:`~gpu_health.evaluator.backtest.card_history.CardHistory` is
  observed on a regular ``step`` grid with no gaps, so ``decide`` has a closed form, expanded
  in bulk inside DuckDB: a row at the first reading and at every change, and while nothing
  changes a keep-alive row every ``P = ceil(keepalive / step) * step`` after the last written
  row (the first grid reading at least ``keepalive`` after it).
  ``tests/evaluator/backtest/test_backtest_events.py`` checks the closed form against ``decide``
  reading by reading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic

from gpu_health.evaluator.backtest.card_history import CardHistory
from gpu_health.evaluator.ingest.dedup import K, R
from gpu_health.evaluator.ingest.write_rule import (
    WriteDecision,
    decide,
    sxid_decision,
    xid_decision,
)
from gpu_health.evaluator.model import (
    UNKNOWN_DETAILS,
    CardDetails,
    CardKey,
    Counters,
    Sample,
    SxidKey,
    SxidSample,
    XidKey,
    XidSample,
)
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest_import import (
    append_segments,
    create_segments,
    expand_segments,
)
from gpu_health.evaluator.store.readings.samples import insert_runs, insert_samples
from gpu_health.evaluator.store.readings.sxid_samples import insert_sxid_samples
from gpu_health.evaluator.store.readings.xid_samples import insert_xid_samples

BATCH_ROWS = 50_000
BATCH_RUNS = 50_000  # keep-alive runs per statement (each expands to many rows)
SLICE = timedelta(days=7)  # rows are expanded (and stored in time order) one week at a time


def keepalive_period(step: timedelta, keepalive: timedelta) -> timedelta:
    """Spacing of keep-alive rows when readings come every ``step``: the first reading at least
    ``keepalive`` after the last written row."""
    step_us = step // timedelta(microseconds=1)
    keep_us = keepalive // timedelta(microseconds=1)
    return timedelta(microseconds=max(1, -(-keep_us // step_us)) * step_us)


def keepalive_rows(h: CardHistory, period: timedelta) -> list[tuple[datetime, int | None,
                                                                    int | None]]:
    """The rows the write rule stores for ``h`` (pure, the closed form; used by tests and small
    callers; :func:`write_histories` expands the same form in SQL)."""
    rows = []
    for i, (at, unc, corr) in enumerate(h.changes):
        end = h.changes[i + 1][0] if i + 1 < len(h.changes) else h.stop + period
        t = at
        while t < end and t <= h.stop:
            rows.append((t, unc, corr))
            t += period
    return rows


def segments(histories: Iterable[CardHistory]) -> list[tuple[object, ...]]:
    """(node, index, first, last, unc, corr) per run of constant counts: the run's first
    reading and the last reading before the next change (or the card's last reading)."""
    result: list[tuple[object, ...]] = []
    for h in histories:
        for i, (at, unc, corr) in enumerate(h.changes):
            last = (h.changes[i + 1][0] - timedelta(microseconds=1)
                    if i + 1 < len(h.changes) else h.stop)
            result.append((h.node_id, h.gpu_index, at, last, unc, corr))
    return result


def write_histories(db: Database, histories: Sequence[CardHistory], *, step: timedelta,
                    keepalive: timedelta, progress: Callable[[int], None] | None = None) -> int:
    """Store the write rule's rows for every history, in time order; returns the row count."""
    if not histories:
        return 0
    create_segments(db)
    append_segments(db, segments(histories))
    return expand_staged(db, min(h.start for h in histories), max(h.stop for h in histories),
                         step=step, keepalive=keepalive, progress=progress)


def expand_staged(db: Database, lo: datetime, hi: datetime, *, step: timedelta,
                  keepalive: timedelta, progress: Callable[[int], None] | None = None) -> int:
    """Store the rows of the runs staged in ``bt_segments`` (first reading ``lo``, last
    ``hi``), one week at a time so they land in time order; returns the row count."""
    period = keepalive_period(step, keepalive)
    written = 0
    start = lo
    while start <= hi:
        end = start + SLICE
        written += expand_segments(db, start, end, period)
        if progress is not None:
            progress(written)
        start = end
    return written


@dataclass(slots=True)
class CountRows(Generic[K, R]):
    """Change-only count rows (XID, SXid) across chunks: each row goes through the live rule
    against its series' last kept row; ``flush`` inserts the kept ones in bulk."""

    rule: Callable[[R, R | None], WriteDecision]
    insert: Callable[[Database, Sequence[R]], int]
    last: dict[K, R] = field(default_factory=dict)
    pending: list[R] = field(default_factory=list)

    def add(self, row: R) -> None:
        if self.rule(row, self.last.get(row.key)).write:
            self.last[row.key] = row
            self.pending.append(row)

    def flush(self, db: Database) -> None:
        self.insert(db, self.pending)
        self.pending.clear()


@dataclass(slots=True)
class ReadingWriter:
    """Per-card write-rule state across chunks of readings (each card's readings must arrive
    in time order). ``add`` applies ``decide``; ``flush`` inserts the kept rows in bulk."""

    db: Database
    keepalive: timedelta
    last: dict[CardKey, Sample]
    pending: list[Sample]
    written: int = 0
    seen: int = 0
    current: dict[CardKey, Sample] = field(default_factory=dict)  # change-point feeding
    runs: list[tuple[Sample, datetime]] = field(default_factory=list)
    period: timedelta = timedelta(0)  # keep-alive spacing of change-point feeding (open(step=))
    xids: CountRows[XidKey, XidSample] = field(
        default_factory=lambda: CountRows(xid_decision, insert_xid_samples))
    sxids: CountRows[SxidKey, SxidSample] = field(
        default_factory=lambda: CountRows(sxid_decision, insert_sxid_samples))

    @classmethod
    def open(cls, db: Database, keepalive: timedelta,
             step: timedelta | None = None) -> ReadingWriter:
        """``step``: the readings' grid, needed only to feed change points (``change``)."""
        period = timedelta(0) if step is None else keepalive_period(step, keepalive)
        return cls(db, keepalive, {}, [], period=period)

    def add(self, key: CardKey, uuid: str | None, at: datetime, counters: Counters,
            details: CardDetails = UNKNOWN_DETAILS) -> bool:
        """Feed one reading; True when it was kept."""
        self.seen += 1
        sample = Sample(key, uuid, at, counters, details)
        if decide(sample, self.last.get(key), self.keepalive).write:
            self.last[key] = sample
            self.pending.append(sample)
            return True
        return False

    def change(self, key: CardKey, at: datetime,
               reading: tuple[str | None, Counters, CardDetails] | None) -> None:
        """The card's reading changed at ``at`` (None: it has none from ``at`` on, a gap)."""
        self.hold(key, at)
        if reading is None:
            self.current.pop(key, None)
            return
        self.add(key, reading[0], at, reading[1], reading[2])
        self.current[key] = Sample(key, reading[0], at, reading[1], reading[2])

    def hold(self, key: CardKey, until: datetime) -> None:
        """The rows ``decide`` writes for the unchanged reading before ``until``: one every
        ``period`` after the last written row (the reading equals that row, or it would have
        been written; an all-unknown reading is never written). Kept as one run."""
        held, last, period = self.current.get(key), self.last.get(key), self.period
        assert period > timedelta(0), "open(step=...) to feed change points"
        if held is None or last is None or held.counters.all_unknown():
            return
        n = (until - last.sampled_at - timedelta(microseconds=1)) // period
        if n <= 0:
            return
        first = Sample(key, held.gpu_uuid, last.sampled_at + period, held.counters, held.details)
        final = last.sampled_at + n * period
        self.runs.append((first, final))
        self.last[key] = Sample(key, held.gpu_uuid, final, held.counters, held.details)
        self.seen += n

    def hold_all(self, until: datetime) -> None:
        for key in list(self.current):
            self.hold(key, until)

    def flush(self) -> int:
        """Insert what was kept since the last flush (time order), in batches."""
        self.pending.sort(key=lambda s: s.sampled_at)
        for i in range(0, len(self.pending), BATCH_ROWS):
            insert_samples(self.db, self.pending[i:i + BATCH_ROWS])
        n = len(self.pending)
        for i in range(0, len(self.runs), BATCH_RUNS):  # measured: large batches 2x faster
            n += insert_runs(self.db, self.runs[i:i + BATCH_RUNS], self.period)
        self.written += n
        self.pending.clear()
        self.runs.clear()
        self.xids.flush(self.db)
        self.sxids.flush(self.db)
        return n
