"""Store files as older releases left them: the schema up to one migration, nothing after.

Migrations are never edited once shipped, so applying the first ``n`` of them with plain DuckDB is
exactly the file an older release wrote (``Database`` would apply them all on open).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from evaluator.store.schema import MIGRATIONS, Only


@contextmanager
def older_file(path: Path, version: int) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB file with migrations 1..``version`` applied; the connection is closed after."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                "description VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)")
    for number, description, statements in MIGRATIONS:
        if number > version:
            break
        for statement in statements:
            if isinstance(statement, Only):
                if statement.engine != "duckdb":
                    continue
                statement = statement.sql
            con.execute(statement)
        con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                    [number, description, datetime(2026, 1, 1, tzinfo=UTC).replace(tzinfo=None)])
    try:
        yield con
    finally:
        con.close()
