"""A backtest's own DuckDB file: its marker table, its run records, and who may open it.

A backtest writes imported history with ``source='real'`` (the replay must treat it as real
history), so such a file must never become a live store, nor a live store a backtest file. The
marker is the table ``gpu_health_backtest_runs`` (one row per run, with its options and, at the
end, its report). It is created here by :func:`mark`, not by a schema migration: a migration
would add it to every live store too, and it would no longer mark anything.

Both directions of the refusal live here. :func:`open_backtest` checks, before anything is
opened for writing:

- a path that resolves to the live database (``storage.path`` of ``--config`` and the default
  ``./data/gpu-health.duckdb``) is refused without being touched;
- an existing file is first opened read-only and refused if it holds samples or predictions but
  no backtest marker (a live store, or a copy of one, under another name);
- importing into a marked file that already holds history is refused (the samples would be
  doubled); without an input, a marked file's samples are replayed again (idempotent: prediction
  ids are deterministic and outcomes are compare-and-set).

:func:`refuse_backtest_file` is the other direction: the live evaluator refuses a marked file.
The bulk import of history is :mod:`gpu_health.evaluator.store.history.backtest_import`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from gpu_health.errors import BacktestError, ConfigError, StoreError
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase

# DuckDB's memory_limit of a backtest file (bytes), and the evaluation times per feature
# statement that fit it: replaying 5,000,000 events, 96 times per statement could not pin its
# blocks under 512 MiB; 48 need about half as much. DuckDB's default (80% of RAM) let the
# process grow with the file.
BACKTEST_MEMORY_LIMIT: Final = 512 * 2**20
BACKTEST_FEATURE_TICKS: Final = 48
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
    known = db.fetchone("SELECT count(*) FROM information_schema.tables "
                        "WHERE table_name = $table", {"table": table})[0]
    return int(db.fetchone(f"SELECT count(*) FROM {table}")[0]) if known else 0


def is_backtest_file(db: Database) -> bool:
    """Whether the file holds the marker table (even without a run: only a backtest makes it)."""
    return bool(db.fetchone("SELECT count(*) FROM information_schema.tables "
                            "WHERE table_name = $table", {"table": MARKER})[0])


def inspect(path: Path) -> FileState:
    """Read-only look at an existing file (nothing is migrated or written). StoreError when it
    cannot be opened read-only (another process writes it)."""
    db = DuckDBDatabase(path, read_only=True, threads=1)
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
        f"SELECT coalesce(max(run_id), 0) + 1, $now, $kind, $input, $options FROM {MARKER} "
        "RETURNING run_id",
        {"now": now, "kind": kind, "input": source,
         "options": json.dumps(options, sort_keys=True, default=str)},
    )
    return int(row[0])


def finish_run(db: Database, run_id: int, *, since: datetime, until: datetime,
               report: dict[str, Any]) -> None:
    db.execute(f"UPDATE {MARKER} SET since = $since, until = $until, report = $report "
               "WHERE run_id = $run_id",
               {"since": since, "until": until,
                "report": json.dumps(report), "run_id": run_id})


def imported_period(db: Database) -> tuple[datetime, datetime] | None:
    """The period of the first run that imported the history (replays reuse it)."""
    row = db.fetchone(f"SELECT since, until FROM {MARKER} WHERE since IS NOT NULL "
                      "ORDER BY run_id LIMIT 1")
    if row is None:
        return None
    return row[0], row[1]


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


def default_path(now: datetime) -> Path:
    return Path("data") / f"backtest-{now.strftime('%Y%m%dT%H%M%SZ')}.duckdb"


def live_problem(path: Path, live: tuple[Path, ...]) -> str | None:
    """Why ``path`` may not be used (it is the live database), or None."""
    target = path.resolve()
    for candidate in live:
        same = target == candidate.resolve()
        if not same and target.exists() and candidate.exists():
            same = target.samefile(candidate)
        if same:
            return (f"--db {path} is the live database ({candidate}); a backtest writes "
                    "imported history as real samples and never touches the live store: "
                    "choose another file")
    return None


def open_backtest(path: Path, *, live: tuple[Path, ...], importing: bool) -> Database:
    """Open (creating if needed) a backtest file after the checks in the module docstring."""
    problem = live_problem(path, live)
    if problem:
        raise ConfigError(problem)
    if path.exists():
        try:
            state = inspect(path)
        except StoreError as exc:
            raise BacktestError(f"cannot open {path} read-only to check it is a backtest file "
                                f"(is a live evaluator using it?): {exc}") from exc
        if not state.marked and (state.samples or state.predictions):
            raise ConfigError(
                f"--db {path} holds {state.samples} samples and {state.predictions} predictions "
                "not written by a backtest (a live store, or a copy of one): a backtest only "
                "writes to its own files; choose a new path")
        if importing and state.samples:
            raise ConfigError(
                f"--db {path} already holds {state.samples} imported samples: importing again "
                "would double them. Choose a new --db, or leave out --prometheus/--events to "
                "replay the samples already there")
        if not importing and not state.samples:
            raise ConfigError(f"--db {path} holds no samples to replay: give --prometheus or "
                              "--events")
    elif not importing:
        raise ConfigError(f"--db {path} does not exist: give --prometheus or --events to import "
                          "history into a new backtest file")
    # A backtest file grows with the history (about 100 MB per million events imported);
    # DuckDB's default cache of 80% of the machine's memory let the process grow with it. Past
    # this bound DuckDB spills to <file>.tmp (bench/events_import.py).
    db = DuckDBDatabase(path, memory_limit=BACKTEST_MEMORY_LIMIT)
    mark(db)
    return db


def refuse_backtest_file(db: Database, path: Path) -> None:
    """A backtest file holds imported history as ``source='real'`` samples and the predictions
    of every replayed version: served live, it would feed replayed data into the statistics,
    the dashboards and the alerts."""
    if is_backtest_file(db):
        raise ConfigError(
            f"storage.path {path} is a backtest file (it holds the table "
            f"{MARKER}, written by `gpu-health-evaluator backtest`), not a live store: its "
            "samples are replayed history. Point storage.path at the live database")
