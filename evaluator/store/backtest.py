"""A backtest's own DuckDB file: its marker table, its run records, and the bulk import.

A backtest writes imported history with ``source='real'`` (the replay must treat it as real
history), so such a file must never become a live store, nor a live store a backtest file. The
marker is the table ``gpu_health_backtest_runs`` (one row per run, with its options and, at the
end, its report). It is created here by :func:`mark`, not by a schema migration: a migration
would add it to every live store too, and it would no longer mark anything. The policy built on
it lives with its callers (:mod:`evaluator.backtest.store` refuses live stores,
:func:`evaluator.service.build_service` refuses backtest files).

The import writes the rows of counter histories (:mod:`evaluator.backtest.history`) in bulk:
runs of constant counts are staged once and expanded into rows inside DuckDB.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from evaluator.store.db import Database
from gpu_health.clock import from_naive_utc, to_naive_utc
from gpu_health.contract import SOURCE_REAL

MARKER: Final = "gpu_health_backtest_runs"
_CREATE: Final = f"""CREATE TABLE IF NOT EXISTS {MARKER} (
    run_id INTEGER PRIMARY KEY,
    started_at TIMESTAMP NOT NULL,
    input_kind VARCHAR NOT NULL,
    input VARCHAR,
    since TIMESTAMP,
    until TIMESTAMP,
    options VARCHAR NOT NULL,
    report VARCHAR
)"""
_US: Final = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class FileState:
    marked: bool  # the marker table holds a run
    samples: int
    predictions: int


def table_rows(db: Database, table: str) -> int:
    """Rows of ``table``; 0 when the file has no such table (tables of newer migrations, the
    marker)."""
    known = db.fetchone("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                        [table])[0]
    return int(db.fetchone(f"SELECT count(*) FROM {table}")[0]) if known else 0


def is_backtest_file(db: Database) -> bool:
    """Whether the file holds the marker table (even without a run: only a backtest makes it)."""
    return bool(db.fetchone("SELECT count(*) FROM information_schema.tables "
                            "WHERE table_name = ?", [MARKER])[0])


def inspect(path: Path) -> FileState:
    """Read-only look at an existing file (nothing is migrated or written). StoreError when it
    cannot be opened read-only (another process writes it)."""
    db = Database(path, read_only=True, threads=1)
    try:
        return FileState(table_rows(db, MARKER) > 0, table_rows(db, "gpu_health_samples"),
                         table_rows(db, "gpu_health_predictions"))
    finally:
        db.close()


def mark(db: Database) -> None:
    """Create the marker table: from now on the file is a backtest file."""
    db.execute(_CREATE)


def start_run(db: Database, *, now: datetime, kind: str, source: str | None,
              options: dict[str, Any]) -> int:
    """Record a run in the marker table (:func:`mark` made it); returns its id."""
    row = db.fetchone(
        f"INSERT INTO {MARKER} (run_id, started_at, input_kind, input, options) "
        f"SELECT coalesce(max(run_id), 0) + 1, ?, ?, ?, ? FROM {MARKER} RETURNING run_id",
        [to_naive_utc(now), kind, source, json.dumps(options, sort_keys=True, default=str)],
    )
    return int(row[0])


def finish_run(db: Database, run_id: int, *, since: datetime, until: datetime,
               report: dict[str, Any]) -> None:
    db.execute(f"UPDATE {MARKER} SET since = ?, until = ?, report = ? WHERE run_id = ?",
               [to_naive_utc(since), to_naive_utc(until), json.dumps(report), run_id])


def imported_period(db: Database) -> tuple[datetime, datetime] | None:
    """The period of the first run that imported the history (replays reuse it)."""
    row = db.fetchone(f"SELECT since, until FROM {MARKER} WHERE since IS NOT NULL "
                      "ORDER BY run_id LIMIT 1")
    if row is None:
        return None
    return from_naive_utc(row[0]), from_naive_utc(row[1])


def imported_assumptions(db: Database) -> dict[str, Any] | None:
    """The ``input`` section of the first run's report (what the history's rows assume)."""
    row = db.fetchone(f"SELECT report FROM {MARKER} WHERE report IS NOT NULL "
                      "ORDER BY run_id LIMIT 1")
    if row is None:
        return None
    try:
        value = json.loads(row[0]).get("input")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, dict) else None


def drop_sample_indexes(db: Database) -> None:
    """Drop the samples table's two ART indexes in a backtest file. Nothing a backtest runs
    uses them: DuckDB answers time-range scans and joins from zone maps, and ART indexes only
    serve constant point lookups (the live API's). Keeping them makes the bulk import about
    twice as slow (measured 27 s vs 13 s for 26.5 M rows) and rebuilding them afterwards costs
    more than it saves (25 s)."""
    db.execute("DROP INDEX IF EXISTS idx_samples_card_time")
    db.execute("DROP INDEX IF EXISTS idx_samples_source")


def stage_segments(db: Database, rows: Sequence[tuple[Any, ...]]) -> None:
    """(node, index, first, last, unc, corr) runs into a connection-local temporary table."""
    cols: list[list[Any]] = [[r[i] for r in rows] for i in range(6)]
    cols[2] = [to_naive_utc(t) for t in cols[2]]
    cols[3] = [to_naive_utc(t) for t in cols[3]]
    db.execute(
        """CREATE OR REPLACE TEMP TABLE bt_segments AS
        SELECT unnest($1::VARCHAR[]) AS node_id, unnest($2::INTEGER[]) AS gpu_index,
               unnest($3::TIMESTAMP[]) AS first_at, unnest($4::TIMESTAMP[]) AS last_at,
               unnest($5::BIGINT[]) AS unc, unnest($6::BIGINT[]) AS corr""", cols)


def expand_segments(db: Database, start: datetime, end: datetime, period: timedelta) -> int:
    """Insert the rows of the staged runs that fall in ``[start, end)``: each run's first reading
    and every ``period`` after it, up to its last reading (the write rule's closed form, see
    :mod:`evaluator.backtest.history`), in time order. Returns the number inserted."""
    row = db.fetchone(
        f"""INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, sampled_at,
                ecc_uncorrected_total, ecc_corrected_total, retired_pages,
                remapped_rows_pending, remapped_rows_failure)
        SELECT node_id, gpu_index, NULL, '{SOURCE_REAL}', ts, unc, corr, NULL, NULL, NULL FROM (
            SELECT node_id, gpu_index, unc, corr, unnest(generate_series(
                first_at + to_microseconds(
                    greatest(0, (epoch_us($a) - epoch_us(first_at) + $p - 1) // $p) * $p),
                least(last_at, $a + to_microseconds($span - 1)),
                to_microseconds($p))) AS ts
            FROM bt_segments
            WHERE first_at < $a + to_microseconds($span) AND last_at >= $a)
        ORDER BY ts, node_id, gpu_index""",
        {"a": to_naive_utc(start), "span": (end - start) // _US, "p": period // _US},
    )
    return int(row[0])


def sample_span(db: Database) -> tuple[datetime | None, datetime | None, int]:
    """First and last sample time and the number of (real) samples."""
    lo, hi, n = db.fetchone("SELECT min(sampled_at), max(sampled_at), count(*) "
                            "FROM gpu_health_samples WHERE source = ?", [SOURCE_REAL])
    return (None if lo is None else from_naive_utc(lo),
            None if hi is None else from_naive_utc(hi), int(n))
