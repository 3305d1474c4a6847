"""The backtest's own DuckDB file: never the live store, always marked as a backtest file.

A backtest writes imported history with ``source='real'`` (the replay must treat it as real
history), so it must never share a file with a live evaluator. Before anything is opened:

- a path that resolves to the live database (``storage.path`` of ``--config`` and the default
  ``./data/gpu-health.duckdb``) is refused without being touched;
- an existing file is first opened read-only and refused if it holds samples or predictions but
  no backtest marker (a live store, or a copy of one, under another name);
- importing into a marked file that already holds history is refused (the samples would be
  doubled); without an input, a marked file's samples are replayed again (idempotent: prediction
  ids are deterministic and outcomes are compare-and-set).

The marker table and its SQL live in :mod:`evaluator.store.backtest`; the other direction (a
live evaluator refusing a backtest file) is :func:`evaluator.service.build_service`'s.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from evaluator.store.backtest import inspect, mark
from evaluator.store.db import Database
from gpu_health.errors import BacktestError, ConfigError, StoreError


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
    db = Database(path)
    mark(db)
    return db
