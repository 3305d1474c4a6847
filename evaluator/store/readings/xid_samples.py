"""Queries on ``gpu_health_xid_samples`` (change-only XID counters per card and XID code).

Writes and the cache-miss lookup are one statement each whatever the number of series, like
:mod:`gpu_health.evaluator.store.readings.samples`. The fault-event definition (:data:`XID_EVENT`)
lives here once and is used by the backfill and the statistics queries, so both read the same
events.

A memory-XID *fault event* is a row of a series (node, index, source, UUID, xid) that has a
previous row (by ``sampled_at``) and whose count

- is greater than the previous count (new Xid lines), or
- is lower than the previous count but above 0: the exporter restarted (its counter starts at 0
  and counts only lines newer than its start), and lines were counted since, so the new value
  is an increase from 0.

A drop to 0 is a restart alone and never an event; a series' first row is never an event (a
count first seen at 3 may be weeks old: nothing says when those lines were logged). The
exporter exports the memory XIDs at 0 from its start, so a first occurrence is seen as 0 -> n.
Missed by design: a restart followed by exactly as many new lines as the old count before the
next scrape (the value looks unchanged, nothing is written).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from gpu_health.evaluator.model import XidKey, XidSample
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.count_series import (
    delete_before_keeping_newest,
    newest_rows,
    sampled_at,
)

TABLE: Final = "gpu_health_xid_samples"
_COLUMNS: Final = ("node_id", "gpu_index", "gpu_uuid", "source", "xid", "sampled_at", "count")
_CASTS: Final = ("VARCHAR", "INTEGER", "VARCHAR", "VARCHAR", "INTEGER", "TIMESTAMP", "BIGINT")
_SERIES: Final = ("node_id", "gpu_index", "source", "xid")

# The series' previous count, over a relation exposing the table's columns.
XID_PREV: Final = (
    "lag(count) OVER (PARTITION BY node_id, gpu_index, source, gpu_uuid, xid "
    "ORDER BY sampled_at)"
)
# Given columns ``count`` and ``prev`` (XID_PREV): is this row a fault event?
XID_EVENT: Final = "(prev IS NOT NULL AND (count > prev OR (count < prev AND count > 0)))"
# The count the event started from: the previous one, or 0 after an exporter restart.
XID_EVENT_BEFORE: Final = "CASE WHEN count > prev THEN prev ELSE 0 END"


def insert_xid_samples(db: Database, rows: Sequence[XidSample]) -> int:
    """Insert all rows in one statement (``Database.insert_columns``). Returns the count."""
    if not rows:
        return 0
    columns: list[Sequence[object]] = [
        [r.key.node_id for r in rows],
        [r.key.gpu_index for r in rows],
        [r.gpu_uuid for r in rows],
        [r.key.source for r in rows],
        [r.key.xid for r in rows],
        [r.sampled_at for r in rows],
        [r.count for r in rows],
    ]
    db.insert_columns(TABLE, dict(zip(_COLUMNS, columns, strict=True)), _CASTS)
    return len(rows)


def latest_xid_rows(db: Database, keys: Sequence[XidKey]) -> dict[XidKey, XidSample]:
    """The newest stored row of each series, in one SELECT for all keys (by their nodes, not
    bounded in time: :func:`~gpu_health.evaluator.store.readings.count_series.newest_rows`)."""
    return newest_rows(db, TABLE, _SERIES, _COLUMNS, keys, _xid_row)


def _xid_row(row: tuple[Any, ...]) -> XidSample:
    node_id, gpu_index, gpu_uuid, source, xid, at, count = row
    return XidSample(XidKey(str(node_id), int(gpu_index), str(source), int(xid)),
                     None if gpu_uuid is None else str(gpu_uuid), sampled_at(at, TABLE),
                     int(count))


def delete_xid_samples_before(db: Database, cutoff: datetime) -> int:
    """Retention: delete rows sampled before ``cutoff`` except each series' newest row (the
    base the next change is compared with, for the write rule and the fault events)."""
    return delete_before_keeping_newest(db, TABLE, _SERIES, cutoff)
