"""Queries on ``gpu_health_samples``: batched latest-row lookup and bulk insert.

Both are exactly one statement regardless of how many cards they cover: the dedup cache relies
on "a cache miss costs at most one SELECT for all missed cards of the cycle", and DESIGN.md on
"one bulk statement per cycle" (per-row inserts measured 100x slower on DuckDB).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from gpu_health.contract import COUNTER_KEYS, DETAIL_KEYS
from gpu_health.errors import StoreError
from gpu_health.evaluator.model import CardDetails, CardKey, Counters, Sample
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings import rollups
from gpu_health.evaluator.store.sql import fill_statement, unnest_rows

_COLUMNS = ("node_id", "gpu_index", "gpu_uuid", "source", "sampled_at", *COUNTER_KEYS,
            *DETAIL_KEYS)
_CASTS = ("VARCHAR", "INTEGER", "VARCHAR", "VARCHAR", "TIMESTAMP",
          *["BIGINT"] * (len(COUNTER_KEYS) + len(DETAIL_KEYS)))


def _row_to_sample(row: Sequence[object]) -> Sample:
    node_id, gpu_index, gpu_uuid, source, sampled_at, *values = row
    if not isinstance(sampled_at, datetime) or not isinstance(gpu_index, int):
        raise StoreError(f"unexpected sample row shape: {row!r}", reason="row_shape")
    known = [None if v is None else int(v) for v in values]  # type: ignore[call-overload]
    n = len(COUNTER_KEYS)
    return Sample(
        key=CardKey(str(node_id), gpu_index, str(source)),
        gpu_uuid=None if gpu_uuid is None else str(gpu_uuid),
        sampled_at=sampled_at,
        counters=Counters(*known[:n]),
        details=CardDetails(*known[n:]),
    )


def insert_samples(db: Database, samples: Sequence[Sample]) -> int:
    """Insert all rows in one statement (``Database.insert_columns``). Returns the count."""
    if not samples:
        return 0
    columns: list[list[object]] = [[] for _ in _COLUMNS]
    for s in samples:
        values = (
            s.key.node_id,
            s.key.gpu_index,
            s.gpu_uuid,
            s.key.source,
            s.sampled_at,
            *s.counters.as_tuple(),
            *s.details.as_tuple(),
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    batch = dict(zip(_COLUMNS, columns, strict=True))
    if not db.shared and not rollups.late(db, (s.sampled_at for s in samples)):
        db.insert_columns("gpu_health_samples", batch, _CASTS)  # the steady state: one statement
        return len(samples)
    with db.transaction():  # rows for a sealed day: its rollups are redone with them
        rollups.hold_watermark(db)
        db.insert_columns("gpu_health_samples", batch, _CASTS)
        rollups.after_insert(db, ((s.key.source, s.key.node_id, s.key.gpu_index, s.sampled_at)
                                  for s in samples))
    return len(samples)


def latest_rows(
    db: Database, keys: Sequence[CardKey], since: datetime | None = None
) -> dict[CardKey, Sample]:
    """The newest stored row of each card, in one SELECT for all keys.

    ``since`` bounds the rows read (``sampled_at >= since``). The ingest path always passes it:
    the write rule never needs a row older than the keepalive, and an unbounded lookup scans a
    card's whole history (measured 0.9 s for 16,000 cards with two days of rows, growing with
    retention) while the bounded one is answered from the newest row groups through DuckDB's
    min/max zone maps (0.025 s). Rows stamped in the future are included either way.
    """
    if not keys:
        return {}
    params: dict[str, object] = {
        "nodes": [k.node_id for k in keys],
        "idx": [k.gpu_index for k in keys],
        "sources": [k.source for k in keys],
    }
    bound = ""
    if since is not None:
        bound = "WHERE s.sampled_at >= $since"
        params["since"] = since
    rows = db.fetchall(
        f"""
        SELECT DISTINCT ON (s.node_id, s.gpu_index, s.source)
               {", ".join("s." + c for c in _COLUMNS)}
        FROM gpu_health_samples s
        JOIN (SELECT DISTINCT unnest($nodes::VARCHAR[]) AS node_id,
                     unnest($idx::INTEGER[]) AS gpu_index,
                     unnest($sources::VARCHAR[]) AS source) k
          ON s.node_id = k.node_id AND s.gpu_index = k.gpu_index AND s.source = k.source
        {bound}
        ORDER BY s.node_id, s.gpu_index, s.source, s.sampled_at DESC
        """,
        params,
    )
    result: dict[CardKey, Sample] = {}
    for row in rows:
        sample = _row_to_sample(row)
        result[sample.key] = sample
    return result


def newest_sample_at(db: Database, source: str) -> datetime | None:
    """The time of the newest row of ``source`` (None: the store has none): where a reader of
    a history source resumes after a restart, and whether a first-start import is due."""
    row = db.fetchone("SELECT max(sampled_at) FROM gpu_health_samples WHERE source = $source",
                      {"source": source})
    value = None if row is None else row[0]
    return value if isinstance(value, datetime) else None


def insert_runs(db: Database, runs: Sequence[tuple[Sample, datetime]], period: timedelta) -> int:
    """Insert runs of keep-alive rows in one statement: per run, the row ``first`` and one every
    ``period`` after it up to ``last`` (same card, UUID and counters; the write rule's closed form
    for an unchanged reading, :mod:`gpu_health.evaluator.backtest.history`). Returns the count."""
    if not runs:
        return 0
    if db.shared:
        with db.transaction():
            rollups.hold_watermark(db)
            return _insert_runs(db, runs, period)
    return _insert_runs(db, runs, period)


def _insert_runs(db: Database, runs: Sequence[tuple[Sample, datetime]], period: timedelta) -> int:
    if rollups.late(db, (last for _, last in runs)):  # a sealed day: the row-by-row path
        rows = [Sample(s.key, s.gpu_uuid, s.sampled_at + k * period, s.counters, s.details)
                for s, last in runs for k in range((last - s.sampled_at) // period + 1)]
        return insert_samples(db, rows)
    keys = (*COUNTER_KEYS, *DETAIL_KEYS)
    columns: list[list[object]] = [[] for _ in range(6 + len(keys))]
    for s, last in runs:
        values = (s.key.node_id, s.key.gpu_index, s.gpu_uuid, s.key.source,
                  s.sampled_at, last, *s.counters.as_tuple(), *s.details.as_tuple())
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    casts = ("VARCHAR", "INTEGER", "VARCHAR", "VARCHAR", "TIMESTAMP", "TIMESTAMP",
             *["BIGINT"] * len(keys))
    names = ("node_id", "gpu_index", "gpu_uuid", "source", "first_at", "last_at", *keys)
    staged = unnest_rows(names, casts, alias=True)
    step_us = period // timedelta(microseconds=1)
    return db.modify(
        f"""INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, sampled_at,
                {", ".join(keys)})
        SELECT node_id, gpu_index, gpu_uuid, source,
               {fill_statement(db.dialect.run_times, step_us=int(step_us))},
               {", ".join(keys)}
        FROM (SELECT {staged}) AS runs""", dict(zip(names, columns, strict=True)))
