"""PostgreSQL as the store (``storage.url: postgresql://...``): the only module importing psycopg.

The store's statements are written once for both engines (DuckDB's SQL plus what
:mod:`gpu_health.evaluator.store.engines.postgres_dialect` gives PostgreSQL); here they are passed
to psycopg with the ``$name`` placeholders rewritten to psycopg's ``%(name)s``.

Connections come from one psycopg pool. A transaction keeps its connection on its thread from
BEGIN to COMMIT (the store's transactions span several ``execute`` calls); a statement outside a
transaction borrows one for itself (autocommit). Sessions run in UTC; ``numeric`` results (a
``sum`` of BIGINTs) read back as ``int`` when integral and ``float`` otherwise, like DuckDB's.

Fencing: while :data:`FENCE` holds a check (set by the leader's loops, see
:mod:`gpu_health.evaluator.cluster.membership`), every write transaction on this database begins
with that check, and a statement outside a transaction gets a transaction of its own, so a deposed
leader's write fails before it lands instead of racing the new leader.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Any, Final
from urllib.parse import urlsplit

import psycopg
import psycopg.errors
from psycopg.adapt import Loader
from psycopg_pool import ConnectionPool, PoolTimeout

from gpu_health.errors import StoreError
from gpu_health.evaluator.config.storage import PostgresConfig
from gpu_health.evaluator.store.db import Database, Params, Result, aware_rows
from gpu_health.evaluator.store.engines.postgres_dialect import (
    COMPAT,
    DIALECT,
    rewrite,
    to_pyformat,
)

_DEFAULTS: Final = PostgresConfig("")  # storage.connect_timeout, storage.statement_timeout

log = logging.getLogger(__name__)

# The leader's fencing check (a callable run inside each write transaction), or None.
FENCE: ContextVar[Callable[[Database], None] | None] = ContextVar("gpu_health_fence",
                                                                    default=None)
# Measured with bench.postgres (1,024 cards x 37 days): the tick's feature statement sorts a
# few hundred thousand rows and spilled to disk at the default 4 MB work_mem; JIT compiled its
# expressions for longer than they ran.
_SESSION = "-c work_mem=64MB -c jit=off"
# pg_type's ``timestamp`` (without time zone): the store's naive-UTC columns, read back aware.
_TIMESTAMP_OID: Final = 1114
_CONFLICTS = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected,
              psycopg.errors.UniqueViolation)


class _NumericLoader(Loader):
    """numeric -> int when integral, else float (DuckDB returns HUGEINT/DOUBLE for the same)."""

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        if "." in text or "e" in text.lower() or text in ("NaN", "Infinity", "-Infinity"):
            return float(text)
        return int(text)


def safe_url(url: str) -> str:
    """``host:port/database`` of a URL: what messages name (never the user's password)."""
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"


class PostgresDatabase(Database):
    """A PostgreSQL database shared by several evaluators, migrated on open."""

    engine = "postgresql"
    dialect = DIALECT
    shared = True
    # Hourly: PostgreSQL aggregated the day of raw rows after a daily watermark in ~1 s per
    # reader at 4,096 cards (bench.postgres, 5-21x DuckDB); an hour of them costs a 24th.
    seal_every = timedelta(hours=1)

    def __init__(self, url: str, *, password: str | None = None, threads: int = 2,
                 connect_timeout: float = _DEFAULTS.connect_timeout,
                 statement_timeout_s: float = _DEFAULTS.statement_timeout,
                 application_name: str = "gpu-health-evaluator",
                 lease_ttl_s: float | None = None) -> None:
        super().__init__(safe_url(url), threads)
        # A statement runs on one server core (these have no parallel plans): the tick's
        # feature statement is split by card over ``threads`` connections (bench.postgres)
        self.feature_shards = max(1, threads)
        self._lease_ttl_ms = None if lease_ttl_s is None else int(lease_ttl_s * 1000)
        kwargs: dict[str, Any] = {"autocommit": True,
                                  "connect_timeout": max(1, int(connect_timeout)),
                                  "options": _options(statement_timeout_s, lease_ttl_s)}
        if password is not None:
            kwargs["password"] = password
        # Which evaluator a session belongs to, in pg_stat_activity and the server's log.
        kwargs["application_name"] = application_name[:63]
        self._pool = ConnectionPool(url, min_size=1, max_size=threads + 6, kwargs=kwargs,
                                    configure=self._configure, open=False,
                                    timeout=connect_timeout, name="gpu-health")
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except (PoolTimeout, psycopg.Error) as exc:
            self._pool.close()
            raise StoreError(f"cannot connect to PostgreSQL at {self.path} within "
                             f"{connect_timeout:g}s", reason="open") from exc
        self._held = threading.local()
        self._by_thread: dict[int, psycopg.Connection[Any]] = {}  # for interrupter()
        self.migrate()
        self.read_memo()

    def _configure(self, con: psycopg.Connection[Any]) -> None:
        con.adapters.register_loader("numeric", _NumericLoader)
        if self._lease_ttl_ms is not None and con.info.server_version >= 140000:
            # A session whose client died (kill -9) while it waited on a lock would hold its
            # locks, the lease row's among them, until the wait ends; the server checks the
            # client every third of a lease TTL instead (PostgreSQL 14 and newer).
            con.execute(f"SET client_connection_check_interval = {self._lease_ttl_ms // 3}")

    # -- plumbing -----------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any] | None:
        con: psycopg.Connection[Any] | None = getattr(self._held, "con", None)
        return con

    def _run_on(self, con: psycopg.Connection[Any], sql: str,
                params: Params | None) -> Result:
        with con.cursor() as cur:
            sql = rewrite(sql)
            if params is None:  # no placeholders: psycopg then leaves "%" alone too
                cur.execute(sql)
            else:
                cur.execute(to_pyformat(sql), params)
            if cur.description is None:
                return Result([], cur.rowcount)
            times = [i for i, c in enumerate(cur.description) if c.type_code == _TIMESTAMP_OID]
            return Result(aware_rows(cur.fetchall(), times), cur.rowcount)

    def execute(self, sql: str, params: Params | None = None) -> Any:
        """Run one statement (in this thread's transaction, or alone); count it; wrap errors."""
        con = self._connection()
        if con is None and FENCE.get() is not None:
            with self.transaction():  # the fence is checked before the statement
                return self.execute(sql, params)
        values = self._counted(params)
        try:
            if con is not None:
                return self._run_on(con, sql, values)
            with self._pool.connection() as borrowed:
                return self._run_on(borrowed, sql, values)
        except PoolTimeout as exc:
            raise StoreError(f"PostgreSQL at {self.path}: no connection", reason="unavailable") \
                from exc
        except psycopg.Error as exc:
            raise _store_error(exc, self.path) from exc

    def modify(self, sql: str, params: Params | None = None) -> int:
        """Run an INSERT, UPDATE or DELETE; return how many rows it changed."""
        result: Result = self.execute(sql, params)
        return max(0, result.rowcount)

    def _begin(self) -> None:
        try:
            con = self._pool.getconn()
        except PoolTimeout as exc:
            raise StoreError(f"PostgreSQL at {self.path}: no connection", reason="unavailable") \
                from exc
        try:
            con.execute("BEGIN")
        except psycopg.Error as exc:
            self._pool.putconn(con)
            raise _store_error(exc, self.path) from exc
        self._held.con = con
        self._by_thread[threading.get_ident()] = con
        fence = FENCE.get()
        if fence is not None:
            try:
                fence(self)
            except BaseException:
                self._end(commit=False)  # the connection goes back, the transaction undone
                raise

    def _end(self, commit: bool) -> None:
        con = self._connection()
        self._held.con = None
        self._by_thread.pop(threading.get_ident(), None)
        if con is None:
            return
        try:
            con.execute("COMMIT" if commit else "ROLLBACK")
        except psycopg.Error as exc:
            if commit:
                raise _store_error(exc, self.path) from exc
            log.warning("rollback failed: %s", type(exc).__name__)
        finally:
            self._pool.putconn(con)

    def interrupter(self) -> Callable[[], None]:
        """Cancel the statement of this thread's transaction (PostgreSQL's cancel request)."""
        thread = threading.get_ident()

        def cancel() -> None:
            con = self._by_thread.get(thread)
            if con is not None:
                con.cancel_safe(timeout=5.0)
        return cancel

    @contextmanager
    def locked(self, key: int) -> Iterator[None]:
        """A transaction holding a transaction-scoped advisory lock (migrations of several
        evaluators starting at once run one after another)."""
        with self.transaction():
            self.execute("SELECT pg_advisory_xact_lock($key)", {"key": key})
            yield

    def compat(self) -> None:
        """The DuckDB functions the shared statements use, defined for PostgreSQL. Run as
        written inside the migration's transaction: definitions are not store statements (no
        placeholders, and ``arg_min``'s own definition must not be rewritten)."""
        con = self._connection()
        assert con is not None, "compat() runs inside the migration lock's transaction"
        try:
            for statement in COMPAT:
                con.execute(statement)
        except psycopg.Error as exc:
            raise _store_error(exc, self.path) from exc

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._pool.close()


def _options(statement_timeout_s: float, lease_ttl_s: float | None) -> str:
    """Session settings. With a lease TTL (several evaluators): a transaction left idle for a
    TTL (its client paused or cut off while holding the lease row's share lock) is ended by the
    server, so it cannot keep the next leader waiting."""
    options = f"-c TimeZone=UTC -c statement_timeout={int(statement_timeout_s * 1000)} {_SESSION}"
    if lease_ttl_s is not None:
        options += f" -c idle_in_transaction_session_timeout={int(lease_ttl_s * 1000)}"
    return options


def _store_error(exc: psycopg.Error, where: str) -> StoreError:
    if isinstance(exc, _CONFLICTS):
        reason = "conflict"
    elif isinstance(exc, psycopg.errors.InsufficientPrivilege):
        reason = "permission"  # a revoked grant: reachable, but refused
    elif isinstance(exc, (psycopg.errors.DiskFull, psycopg.errors.InsufficientResources,
                          psycopg.errors.OutOfMemory)):
        reason = "resources"  # disk full, out of memory or connections
    elif isinstance(exc, psycopg.OperationalError):
        reason = "unavailable"
    else:
        reason = "query"
    # psycopg's message names the statement's problem, never the connection's password.
    return StoreError(f"PostgreSQL at {where}: {type(exc).__name__}: {exc}", reason=reason)
