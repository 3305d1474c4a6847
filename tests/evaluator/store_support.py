"""Store files as older releases left them: the schema up to one migration, nothing after.

Migrations are never edited once shipped, so applying the first ``n`` of them with plain DuckDB is
exactly the file an older release wrote (``Database`` would apply them all on open).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from gpu_health.clock import from_naive_utc
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.migrations import MIGRATIONS, Only


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


# Test-only reads (they lived in product modules no product code calls).
@dataclass(frozen=True, slots=True)
class AuditEntry:
    at: datetime
    actor: str
    action: str
    node_id: str
    alert_id: str
    reason: str


def count_samples(db: Database, source: str | None = None) -> int:
    """Rows in ``gpu_health_samples`` (of one source, or all)."""
    if source is None:
        row = db.fetchone("SELECT count(*) FROM gpu_health_samples")
    else:
        row = db.fetchone("SELECT count(*) FROM gpu_health_samples WHERE source = $source",
                          {"source": source})
    return int(row[0])


def count_xid_samples(db: Database, source: str | None = None) -> int:
    """Rows in ``gpu_health_xid_samples`` (of one source, or all)."""
    if source is None:
        return int(db.fetchone("SELECT count(*) FROM gpu_health_xid_samples")[0])
    return int(db.fetchone("SELECT count(*) FROM gpu_health_xid_samples WHERE source = $source",
                           {"source": source})[0])


def audit_log(db: Database, node_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
    """The newest audit entries (of one node), newest first."""
    where, params = ("WHERE node_id = $node", {"node": node_id}) if node_id else ("", {})
    rows = db.fetchall(
        f"SELECT happened_at, actor, action, node_id, alert_id, reason "
        f"FROM gpu_health_alert_audit {where} ORDER BY happened_at DESC, seq DESC LIMIT $limit",
        {**params, "limit": limit})
    return [AuditEntry(from_naive_utc(at), str(actor), str(action), str(node), str(aid),
                       str(reason)) for at, actor, action, node, aid, reason in rows]
