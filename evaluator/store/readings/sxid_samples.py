"""Queries on ``gpu_health_sxid_samples`` (change-only NVSwitch SXid counters per node).

Like :mod:`gpu_health.evaluator.store.readings.xid_samples`: one statement per write or cache-miss
lookup whatever the number of series, no keep-alive rows, retention keeping each series' newest
row (:mod:`~gpu_health.evaluator.store.readings.count_series`).
A count restarts at 0 with the exporter (it counts the kernel-log lines it followed).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from gpu_health.evaluator.model import SxidKey, SxidSample
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.count_series import (
    delete_before_keeping_newest,
    newest_rows,
    sampled_at,
)

TABLE: Final = "gpu_health_sxid_samples"
_SERIES: Final = ("node_id", "source", "nvswitch", "pci_bus_id", "sxid", "fatal")
_COLUMNS: Final = (*_SERIES, "sampled_at", "count")
_CASTS: Final = ("VARCHAR", "VARCHAR", "INTEGER", "VARCHAR", "INTEGER", "BOOLEAN", "TIMESTAMP",
                 "BIGINT")


def insert_sxid_samples(db: Database, rows: Sequence[SxidSample]) -> int:
    """Insert all rows in one statement (``Database.insert_columns``). Returns the count."""
    if not rows:
        return 0
    columns: list[Sequence[object]] = [[r.key[i] for r in rows] for i in range(len(_SERIES))]
    columns += [[r.sampled_at for r in rows], [r.count for r in rows]]
    db.insert_columns(TABLE, dict(zip(_COLUMNS, columns, strict=True)), _CASTS)
    return len(rows)


def latest_sxid_rows(db: Database, keys: Sequence[SxidKey]) -> dict[SxidKey, SxidSample]:
    """The newest stored row of each series, in one SELECT for all keys (by their nodes, not
    bounded in time: :func:`~gpu_health.evaluator.store.readings.count_series.newest_rows`)."""
    return newest_rows(db, TABLE, _SERIES, _COLUMNS, keys, _sxid_row)


def _sxid_row(row: tuple[Any, ...]) -> SxidSample:
    node_id, source, nvswitch, pci, sxid, fatal, at, count = row
    return SxidSample(SxidKey(str(node_id), str(source), int(nvswitch), str(pci), int(sxid),
                              bool(fatal)), sampled_at(at, TABLE), int(count))


def delete_sxid_samples_before(db: Database, cutoff: datetime) -> int:
    """Retention: delete rows sampled before ``cutoff`` except each series' newest row (the base
    the next change is compared with)."""
    return delete_before_keeping_newest(db, TABLE, _SERIES, cutoff)
