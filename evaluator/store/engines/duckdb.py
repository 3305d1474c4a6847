"""The DuckDB engine: one file (or ``:memory:``) per process, migrated on open.

DuckDB allows one writer process per file; inside the process each thread uses its own cursor
(:meth:`DuckDBDatabase.cursor`), which DuckDB documents as the way to share one database between
threads. Driver errors become :class:`~gpu_health.errors.StoreError` with a reason.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from gpu_health.errors import StoreError
from gpu_health.evaluator.store.db import Database, Params, Result, aware_rows, naive_values
from gpu_health.evaluator.store.engines.duckdb_columns import numpy_columns, rows_of
from gpu_health.evaluator.store.engines.duckdb_dialect import DIALECT

log = logging.getLogger(__name__)


class DuckDBDatabase(Database):
    """One DuckDB file (or ``:memory:``), migrated on open."""

    engine = "duckdb"
    dialect = DIALECT
    # This process is the only writer (DuckDB: one process per file), so a store module may
    # keep a value in step with its table in ``memo``.
    shared = False
    # How far the rollup watermark moves at a time (gpu_health.evaluator.store.readings.rollups).
    # Hourly: with a daily watermark every reader scanned the open day's raw rows again (4.7 M at
    # 16,384 cards at 23:59); an hour of them costs a 24th (bench.scale --cards).
    seal_every = timedelta(hours=1)
    # One statement for the rules' feature extraction: DuckDB runs it on all its threads.
    feature_shards = 1

    def __init__(self, path: str | Path, *, read_only: bool = False, threads: int = 2,
                 memory_limit: int | None = None) -> None:
        """``memory_limit``: bytes (storage.memory_limit); beyond it DuckDB spills to
        ``<path>.tmp``. None: DuckDB's default, 80% of the machine's memory."""
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        config: dict[str, str | bool | int | float | list[str]] = (
            {} if memory_limit is None else {"memory_limit": f"{memory_limit}B"})
        try:
            self._con = duckdb.connect(self.path, read_only=read_only, config=config)
        except duckdb.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}", reason="open") from exc
        super().__init__(self.path, threads)
        if not read_only:
            self.migrate()
            self.read_memo()  # now, so the first ingest cycle costs no extra statement

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor on the shared database."""
        cur: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._con.cursor()
            self._local.cursor = cur
        return cur

    def execute(self, sql: str, params: Params | None = None) -> Result:
        """Run one statement on this thread's cursor; count it; wrap driver errors; its rows
        read (TIMESTAMP columns aware, :func:`~gpu_health.evaluator.store.db.aware_rows`)."""
        cursor = self._run(sql, params)
        try:
            rows = cursor.fetchall() if cursor.description is not None else []
        except duckdb.Error as exc:
            raise _store_error(exc) from exc
        return Result(aware_rows(rows, _times(cursor.description)), -1)

    def _run(self, sql: str, params: Params | None) -> duckdb.DuckDBPyConnection:
        values = self._counted(params)
        try:
            return self.cursor().execute(sql, values) if values is not None else \
                self.cursor().execute(sql)
        except duckdb.Error as exc:
            raise _store_error(exc) from exc

    def fetchall_wide(self, sql: str, params: Params | None = None) -> list[Any]:
        """The rows read as NumPy columns (``fetchnumpy``), then zipped: DuckDB builds a Python
        value per cell either way, but column by column it skips its row-wise conversion."""
        cursor = self._run(sql, params)
        try:
            return rows_of(cursor.fetchnumpy(), _times(cursor.description))
        except duckdb.Error as exc:
            raise _store_error(exc) from exc

    def insert_columns(self, table: str, columns: Mapping[str, Sequence[object]],
                       casts: Sequence[str]) -> None:
        """One INSERT reading the columns as NumPy arrays (engines/duckdb_columns.py says
        why), registered on this thread's cursor for the statement only."""
        try:
            arrays, select = numpy_columns(naive_values(columns), casts)
        except (ValueError, OverflowError, TypeError) as exc:
            raise StoreError(f"a {table} batch does not fit its columns: {exc}",
                             reason="query") from exc
        view = f"gpu_health_batch_{threading.get_ident()}"
        cursor = self.cursor()
        try:
            # DuckDB 2 refuses to register beside the unread rest of an earlier result (a
            # fetchone): finish it first (DuckDB 1 has no ``complete`` and did so itself).
            if (complete := getattr(cursor, "complete", None)) is not None:
                complete()
            cursor.register(view, arrays)
        except duckdb.Error as exc:
            raise _store_error(exc) from exc
        try:
            self.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT "
                         f"{', '.join(select)} FROM {view}")
        finally:  # in an aborted transaction this fails: the next batch's view replaces it
            with contextlib.suppress(duckdb.Error):
                cursor.unregister(view)

    def modify(self, sql: str, params: Params | None = None) -> int:
        """Run an INSERT, UPDATE or DELETE; return how many rows it changed (DuckDB answers
        with one row holding the count)."""
        row = self.fetchone(sql, params)
        return int(row[0]) if row else 0

    def _begin(self) -> None:
        self.execute("BEGIN TRANSACTION")

    def _end(self, commit: bool) -> None:
        if commit:
            self.execute("COMMIT")
            return
        try:
            self.cursor().execute("ROLLBACK")
        except duckdb.Error:
            log.exception("rollback failed")

    def interrupter(self) -> Callable[[], None]:
        """Called on a store thread: a function any thread may call to interrupt the statement
        that thread is running (a retention run past its time)."""
        return self.cursor().interrupt

    def compat(self) -> None:
        """Nothing: the shared statements are DuckDB's dialect."""

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        try:
            self._con.close()
        except duckdb.Error:
            log.exception("closing %s failed", self.path)



def _times(description: list[Any] | None) -> list[int]:
    """The positions of a result's TIMESTAMP columns (naive UTC in the store)."""
    return [i for i, column in enumerate(description or ()) if column[1] == "TIMESTAMP"]


def _store_error(exc: duckdb.Error) -> StoreError:
    return StoreError(f"{type(exc).__name__}: {exc}", reason=_reason(exc))


def _reason(exc: duckdb.Error) -> str:
    """The StoreError reason of a DuckDB error. A full disk surfaces as a failed commit
    (TransactionException "... No space left on device"), which is not a write conflict."""
    text = str(exc)
    if "No space left on device" in text or "Disk full" in text:
        return "resources"
    if isinstance(exc, duckdb.PermissionException):
        return "permission"
    if isinstance(exc, duckdb.IOException):
        return "io"
    if isinstance(exc, duckdb.TransactionException | duckdb.ConstraintException):
        return "conflict"
    return "query"
