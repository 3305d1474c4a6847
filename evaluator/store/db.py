"""The store's engine-neutral interface: statements, transactions, migrations, the thread pool.

Every statement goes through :meth:`Database.execute`, which counts it (the dedup tests prove
"zero statements in steady state" with that counter) and turns the driver's errors into
:class:`~gpu_health.errors.StoreError`. The engines beside each other in
``evaluator/store/engines/`` say how: DuckDB (one process per file) and PostgreSQL (several
evaluators, fenced). The stages type against :class:`Database` and never see a driver.

It is also the one door where times change shape: the store's columns are ``TIMESTAMP``, naive
UTC, while every caller and every store module passes and reads aware datetimes. A statement's
values go in through :func:`naive_values` and its ``TIMESTAMP`` columns come out through
:func:`aware_rows`; no other module converts.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar

from gpu_health.clock import from_naive_utc, system_clock, to_naive_utc
from gpu_health.errors import StoreError
from gpu_health.evaluator.store.migrations import MIGRATIONS, Only
from gpu_health.evaluator.store.rollup_sql import SEALED_MEMO, STATE
from gpu_health.evaluator.store.sql import Dialect, unnest_rows

log = logging.getLogger(__name__)

T = TypeVar("T")
# A statement's values, by the names of its $name placeholders (gpu_health.evaluator.store.sql).
Params = Mapping[str, Any]
MIGRATION_LOCK = 0x6770_7568_6561  # advisory-lock key: one evaluator migrates at a time


def naive_values(params: Params) -> dict[str, Any]:
    """A statement's values as the engines bind them: each datetime, alone or in a list (a
    column of a batch), as naive UTC; everything else as given."""
    return {name: _naive(value) for name, value in params.items()}


def _naive(value: object) -> object:
    if isinstance(value, datetime):
        return to_naive_utc(value)
    if isinstance(value, list | tuple) and isinstance(
            next((v for v in value if v is not None), None), datetime):
        # A batch repeats a few instants (one per scrape): each converted once (500,000 one
        # by one cost 0.6 CPU-s of a 100,000-card ingest cycle).
        naive = functools.cache(_naive_or_none)
        return [naive(v) for v in value]
    return value


def _naive_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else to_naive_utc(value)


def _aware_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else from_naive_utc(value)


def aware_rows(rows: list[Any], times: Sequence[int]) -> list[Any]:
    """``rows`` with the values of their ``TIMESTAMP`` columns (positions ``times``) as aware
    UTC datetimes; the rows themselves when there are none."""
    if not times or not rows:
        return rows
    aware = functools.cache(_aware_or_none)  # a result repeats few instants
    out = []
    for row in rows:
        cells = list(row)
        for i in times:
            cells[i] = aware(cells[i])
        out.append(tuple(cells))
    return out


def aware_column(values: list[Any]) -> list[Any]:
    """One ``TIMESTAMP`` column of a result read column by column, as aware UTC datetimes."""
    return list(map(functools.cache(_aware_or_none), values))


@dataclass(frozen=True, slots=True)
class Result:
    """A statement's rows, read as it ran (before its connection went back, on PostgreSQL),
    their TIMESTAMP columns already aware (:func:`aware_rows`)."""

    rows: list[Any]
    rowcount: int

    def fetchall(self) -> list[Any]:
        return self.rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None


class Database(ABC):
    """The store as the stages use it, whichever engine holds it: statements (counted, driver
    errors wrapped), transactions, migrations, the thread pool. An engine
    (:class:`~gpu_health.evaluator.store.engines.duckdb.DuckDBDatabase`,
    :class:`~gpu_health.evaluator.store.engines.postgres.PostgresDatabase`) says how a statement
    runs and sets what differs below."""

    # Which engine runs (a migration step may be for one engine only).
    engine: ClassVar[str]
    # Its text where the shared statements cannot agree (gpu_health.evaluator.store.sql).
    dialect: ClassVar[Dialect]
    # False: this process is the only writer, so a store module may keep a value in step with
    # its table in ``memo``. True: other evaluators write too, so such values are read again in
    # the transaction that relies on them.
    shared: ClassVar[bool]
    # How far the rollup watermark moves at a time (gpu_health.evaluator.store.readings.rollups).
    seal_every: timedelta
    # Statements the rules' feature extraction is split into, each on its own connection
    # (gpu_health.evaluator.store.predictions.features).
    feature_shards: int

    def __init__(self, path: str, threads: int) -> None:
        self.path = path
        self._setup_common(threads)

    def _setup_common(self, threads: int) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.statements = 0
        # Values a store module keeps in step with its own table (one process per DuckDB file),
        # e.g. the rollup watermark, so the write path decides without a statement.
        self.memo: dict[str, Any] = {}
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="store")

    # -- what an engine provides -------------------------------------------------------------

    @abstractmethod
    def execute(self, sql: str, params: Params | None = None) -> Any:
        """Run one statement; count it; wrap driver errors into StoreError."""

    @abstractmethod
    def modify(self, sql: str, params: Params | None = None) -> int:
        """Run an INSERT, UPDATE or DELETE; return how many rows it changed."""

    @abstractmethod
    def _begin(self) -> None: ...

    @abstractmethod
    def _end(self, commit: bool) -> None: ...

    @abstractmethod
    def interrupter(self) -> Callable[[], None]:
        """Called on a store thread: a function any thread may call to interrupt the statement
        that thread is running (a retention run past its time)."""

    @abstractmethod
    def close(self) -> None: ...

    # -- the same on every engine -------------------------------------------------------------

    def _counted(self, params: object) -> dict[str, Any] | None:
        """Count a statement about to run and return its values as the engine binds them
        (:func:`naive_values`); refuse positional parameters (one placeholder style: ``$name``
        with a dict, gpu_health.evaluator.store.sql)."""
        if params is not None and not isinstance(params, Mapping):
            raise TypeError("store statements bind named parameters: $name with a dict of "
                            f"values, not a {type(params).__name__}")
        with self._lock:
            self.statements += 1
        return None if params is None else naive_values(params)

    def fetchall(self, sql: str, params: Params | None = None) -> list[Any]:
        result: list[Any] = self.execute(sql, params).fetchall()
        return result

    def fetchall_wide(self, sql: str, params: Params | None = None) -> list[Any]:
        """What :meth:`fetchall` gives, for a result of many rows whose columns are VARCHAR,
        INTEGER, BIGINT, BOOLEAN, DOUBLE or TIMESTAMP: an engine may read it column by column
        (DuckDB does: the capability matrix's 100,000 rows of 12 columns took 0.65 s as rows,
        0.37 s as columns)."""
        return self.fetchall(sql, params)

    def fetchone(self, sql: str, params: Params | None = None) -> Any:
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
        self._local.depth = 1
        try:
            self._begin()
        except BaseException:
            self._local.depth = 0
            raise
        try:
            yield
        except BaseException:
            self.memo.clear()  # a store module may have noted a value this rollback undoes
            self._local.depth = 0
            self._end(commit=False)
            raise
        self._local.depth = 0
        try:
            self._end(commit=True)
        except StoreError:
            self.memo.clear()  # a failed commit undid the transaction, notes included
            raise

    @contextmanager
    def locked(self, key: int) -> Iterator[None]:
        """A transaction that runs alone among this database's writers (one writer process: the
        transaction is enough; PostgreSQL adds an advisory lock on ``key``)."""
        del key
        with self.transaction():
            yield

    def insert_columns(self, table: str, columns: Mapping[str, Sequence[object]],
                       casts: Sequence[str]) -> None:
        """Insert one row per position of ``columns`` (name -> values, all the same length;
        None is NULL, timestamps aware) in one statement: how the store writes a batch.
        Here one list parameter per column, unnested; an engine may read the lists faster."""
        names = list(columns)
        self.execute(f"INSERT INTO {table} ({', '.join(names)}) SELECT "
                     f"{unnest_rows(names, casts)}", dict(columns))

    @abstractmethod
    def compat(self) -> None:
        """Engine-specific definitions the shared statements need (run while migrating)."""

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking store call on the database thread pool, from async code. The caller's
        context goes along (the leader's fence,
        :data:`gpu_health.evaluator.store.engines.postgres.FENCE`)."""
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        return await loop.run_in_executor(self._executor, ctx.run, fn, *args)

    def read_memo(self) -> None:
        """(Re)read the noted values from their tables: the rollup watermark."""
        row = self.fetchone(f"SELECT max(sealed_until) FROM {STATE}")
        self.memo[SEALED_MEMO] = row[0]

    # -- migrations ---------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply every migration not yet recorded; return the versions applied now."""
        with self.locked(MIGRATION_LOCK):
            self.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
                "applied_at TIMESTAMP NOT NULL)"
            )
            done = {row[0] for row in self.fetchall("SELECT version FROM schema_migrations")}
            newest = max((m[0] for m in MIGRATIONS), default=0)
            if done and max(done) > newest:
                # Before compat(): an old evaluator of a rolling upgrade must not replace the
                # newer release's shared SQL functions (PostgreSQL) before it gives up.
                raise StoreError(f"the store at {self.path} has schema version {max(done)}, "
                                 f"newer than this evaluator knows ({newest}): upgrade the "
                                 "evaluator, or point it at another store", reason="schema")
            self.compat()
        applied: list[int] = []
        for version, description, statements in MIGRATIONS:
            if version in done:
                continue
            with self.locked(MIGRATION_LOCK):
                if self.fetchone("SELECT 1 FROM schema_migrations WHERE version = $version",
                                 {"version": version}):
                    continue  # another evaluator applied it while this one waited
                for statement in statements:
                    if isinstance(statement, Only):
                        if statement.engine != self.engine:
                            continue
                        statement = statement.sql
                    self.execute(statement)
                self.execute(
                    "INSERT INTO schema_migrations VALUES ($version, $description, $at)",
                    {"version": version, "description": description,
                     "at": system_clock()},
                )
            applied.append(version)
            log.info("applied schema migration %d: %s", version, description)
        return applied


