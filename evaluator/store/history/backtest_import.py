"""The bulk import of history into a backtest file
(:mod:`gpu_health.evaluator.store.history.backtest`).

The rows of counter histories (:mod:`gpu_health.evaluator.backtest.history`) are written in bulk:
runs of constant counts are staged once and expanded into rows inside DuckDB.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.store.db import Database

_US: Final = timedelta(microseconds=1)


SEGMENT_COLUMNS: Final = ("node_id", "gpu_index", "first_at", "last_at", "unc", "corr")
_SEGMENT_TYPES: Final = ("VARCHAR", "INTEGER", "TIMESTAMP", "TIMESTAMP", "BIGINT", "BIGINT")


def create_segments(db: Database) -> None:
    """An empty connection-local table of (node, index, first, last, unc, corr) runs."""
    columns = ", ".join(f"{n} {t}" for n, t in zip(SEGMENT_COLUMNS, _SEGMENT_TYPES, strict=True))
    db.execute(f"CREATE OR REPLACE TEMP TABLE bt_segments ({columns})")


def append_segments(db: Database, rows: Sequence[tuple[Any, ...]]) -> None:
    """Add (node, index, first, last, unc, corr) runs to the table :func:`create_segments`
    made."""
    if not rows:
        return
    cols: list[list[Any]] = [[r[i] for r in rows] for i in range(6)]
    db.insert_columns("bt_segments", dict(zip(SEGMENT_COLUMNS, cols, strict=True)),
                      _SEGMENT_TYPES)


def create_event_stage(db: Database) -> None:
    """An empty connection-local table of events as (card number, reading in epoch
    microseconds, uncorrectable?): a file's events wait there, not in the process's memory."""
    db.execute("CREATE OR REPLACE TEMP TABLE bt_events "
               "(card INTEGER, slot BIGINT, unc BOOLEAN)")


def stage_events(db: Database, cards: list[int], slots: list[int], unc: list[bool]) -> None:
    db.insert_columns("bt_events", {"card": cards, "slot": slots, "unc": unc},
                      ("INTEGER", "BIGINT", "BOOLEAN"))


def event_slots(db: Database, first: int, stop: int) -> list[tuple[int, int, int, int]]:
    """(card, reading, uncorrectable, correctable) of cards ``first`` .. ``stop - 1``: the
    staged events counted per card and reading, in card and time order."""
    rows: list[tuple[int, int, int, int]] = db.fetchall(
        "SELECT card, slot, count(*) FILTER (WHERE unc), count(*) FILTER (WHERE NOT unc) "
        "FROM bt_events WHERE card >= $first AND card < $stop "
        "GROUP BY card, slot ORDER BY card, slot", {"first": first, "stop": stop})
    return rows


def drop_event_stage(db: Database) -> None:
    db.execute("DROP TABLE IF EXISTS bt_events")


def expand_segments(db: Database, start: datetime, end: datetime, period: timedelta) -> int:
    """Insert the rows of the staged runs that fall in ``[start, end)``: each run's first reading
    and every ``period`` after it, up to its last reading (the write rule's closed form, see
    :mod:`gpu_health.evaluator.backtest.history`), in time order. Returns the number inserted."""
    row = db.fetchone(
        f"""INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, sampled_at,
                ecc_uncorrected_total, ecc_corrected_total, retired_pages,
                remapped_rows_pending, remapped_rows_failure)
        SELECT node_id, gpu_index, NULL, '{SOURCE_REAL}', ts, unc, corr, NULL, NULL, NULL FROM (
            SELECT node_id, gpu_index, unc, corr, unnest(generate_series(
                first_at + to_microseconds(
                    greatest(0, ((epoch_us($a) - epoch_us(first_at) + $p - 1) // $p)) * $p),
                least(last_at, $a + to_microseconds($span - 1)),
                to_microseconds($p))) AS ts
            FROM bt_segments
            WHERE first_at < $a + to_microseconds($span) AND last_at >= $a)
        ORDER BY ts, node_id, gpu_index""",
        {"a": start, "span": (end - start) // _US, "p": period // _US},
    )
    return int(row[0])


def sample_span(db: Database) -> tuple[datetime | None, datetime | None, int]:
    """First and last sample time and the number of (real) samples."""
    lo, hi, n = db.fetchone("SELECT min(sampled_at), max(sampled_at), count(*) "
                            "FROM gpu_health_samples WHERE source = $source",
                            {"source": SOURCE_REAL})
    return lo, hi, int(n)
