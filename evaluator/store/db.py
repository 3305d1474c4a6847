"""DuckDB connection, migrations, statement counting and error wrapping.

DuckDB allows one writer process per file; inside the process each thread uses its own cursor
(``Database.cursor``), which DuckDB documents as the way to share one database between threads.
Every statement goes through :meth:`Database.execute`, which counts it (the dedup tests prove
"zero statements in steady state" with that counter) and turns ``duckdb.Error`` into
:class:`~gpu_health.errors.StoreError`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from evaluator.store.rollup_sql import SEALED_MEMO, STATE
from evaluator.store.schema import MIGRATIONS
from gpu_health.clock import from_naive_utc, system_clock, to_naive_utc
from gpu_health.errors import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")


class Database:
    """One DuckDB file (or ``:memory:``), migrated on open."""

    def __init__(self, path: str | Path, *, read_only: bool = False, threads: int = 2) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}", reason="open") from exc
        self._local = threading.local()
        self._lock = threading.Lock()
        self.statements = 0
        # Values a store module keeps in step with its own table (one process per DuckDB file),
        # e.g. the rollup watermark, so the write path decides without a statement.
        self.memo: dict[str, Any] = {}
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="duckdb")
        if not read_only:
            self.migrate()
            self.read_memo()  # now, so the first ingest cycle costs no extra statement

    # -- plumbing -----------------------------------------------------------------------------

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor on the shared database."""
        cur: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._con.cursor()
            self._local.cursor = cur
        return cur

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        """Run one statement on this thread's cursor; count it; wrap driver errors."""
        with self._lock:
            self.statements += 1
        try:
            return self.cursor().execute(sql, params) if params is not None else \
                self.cursor().execute(sql)
        except duckdb.Error as exc:
            raise StoreError(f"{type(exc).__name__}: {exc}", reason="query") from exc

    def fetchall(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[Any]:
        result: list[Any] = self.execute(sql, params).fetchall()
        return result

    def fetchone(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        return self.execute(sql, params).fetchone()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN ... COMMIT on this thread's cursor; ROLLBACK (and re-raise) on any error.
        Nested use joins the outer transaction (a store function may need one whether or not
        its caller already opened it)."""
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        self.execute("BEGIN TRANSACTION")
        self._local.depth = 1
        try:
            yield
        except BaseException:
            self.memo.clear()  # a store module may have noted a value this rollback undoes
            try:
                self.cursor().execute("ROLLBACK")
            except duckdb.Error:
                log.exception("rollback failed")
            raise
        finally:
            self._local.depth = 0
        try:
            self.execute("COMMIT")
        except StoreError:
            self.memo.clear()  # a failed commit undid the transaction, notes included
            raise

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking store call on the database thread pool, from async code."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        try:
            self._con.close()
        except duckdb.Error:
            log.exception("closing %s failed", self.path)

    def read_memo(self) -> None:
        """(Re)read the noted values from their tables: the rollup watermark."""
        row = self.fetchone(f"SELECT max(sealed_until) FROM {STATE}")
        self.memo[SEALED_MEMO] = None if row[0] is None else from_naive_utc(row[0])

    # -- migrations ---------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply every migration not yet recorded; return the versions applied now."""
        self.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
            "applied_at TIMESTAMP NOT NULL)"
        )
        done = {row[0] for row in self.fetchall("SELECT version FROM schema_migrations")}
        applied: list[int] = []
        for version, description, statements in MIGRATIONS:
            if version in done:
                continue
            with self.transaction():
                for statement in statements:
                    self.execute(statement)
                self.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                    [version, description, to_naive_utc(system_clock())],
                )
            applied.append(version)
            log.info("applied schema migration %d: %s", version, description)
        return applied
