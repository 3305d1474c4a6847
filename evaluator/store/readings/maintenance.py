"""Ingest-side store maintenance: node registry upsert, retention delete, simulated purge.

Every function is one statement (or one transaction) over :class:`Database`; callers in async
code go through ``Database.run``. ``delete_samples_before_async`` adds a timeout that really stops
the DELETE (DuckDB ``interrupt()`` on the cursor running it) instead of leaving a thread busy.
Retention and the simulated purge cover the sample tables (``gpu_health_samples``,
``gpu_health_xid_samples``, ``gpu_health_sxid_samples``); retention keeps each XID and SXid
series' newest row (see ``xid_samples.delete_xid_samples_before``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from gpu_health.contract import SOURCE_SIMULATED
from gpu_health.errors import StoreError
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings import rollups
from gpu_health.evaluator.store.readings.sxid_samples import TABLE as SXID_TABLE
from gpu_health.evaluator.store.readings.sxid_samples import delete_sxid_samples_before
from gpu_health.evaluator.store.readings.xid_samples import TABLE as XID_TABLE
from gpu_health.evaluator.store.readings.xid_samples import delete_xid_samples_before
from gpu_health.evaluator.store.sql import unnest_rows


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A row of ``gpu_health_nodes``: who the node is, who owns it, where it is scraped, and how
    many cards its last scrape listed (all of them, all-unknown ones included) for which source."""

    node_id: str
    tenant: str | None
    target: str | None
    last_seen: datetime
    listed_cards: int | None = None
    listed_source: str | None = None


_NODE_COLUMNS: Final = ("node_id", "tenant", "target", "last_seen", "listed_cards",
                        "listed_source")
_NODE_CASTS: Final = ("VARCHAR", "VARCHAR", "VARCHAR", "TIMESTAMP", "INTEGER", "VARCHAR")


def upsert_nodes(db: Database, nodes: Sequence[NodeRecord]) -> int:
    """Insert or update all ``nodes`` in one statement (node ids must be unique)."""
    if not nodes:
        return 0
    db.execute(
        f"""
        INSERT INTO gpu_health_nodes ({", ".join(_NODE_COLUMNS)})
        SELECT {unnest_rows(_NODE_COLUMNS, _NODE_CASTS)}
        ON CONFLICT (node_id) DO UPDATE SET
            tenant = excluded.tenant, target = excluded.target, last_seen = excluded.last_seen,
            listed_cards = excluded.listed_cards, listed_source = excluded.listed_source
        """,
        {
            "node_id": [n.node_id for n in nodes],
            "tenant": [n.tenant for n in nodes],
            "target": [n.target for n in nodes],
            "last_seen": [n.last_seen for n in nodes],
            "listed_cards": [n.listed_cards for n in nodes],
            "listed_source": [n.listed_source for n in nodes],
        },
    )
    return len(nodes)


@dataclass(frozen=True, slots=True)
class Deleted:
    """Rows one retention run removed, per table."""

    samples: int
    xid_samples: int
    sxid_samples: int

    @property
    def total(self) -> int:
        return self.samples + self.xid_samples + self.sxid_samples


def delete_samples_before(db: Database, cutoff: datetime) -> Deleted:
    """Retention: delete samples, XID and SXid samples (both sources) sampled strictly before
    ``cutoff``, in one transaction (an interrupted run deletes nothing)."""
    with db.transaction():
        deleted = db.modify(
            "DELETE FROM gpu_health_samples WHERE sampled_at < $cutoff",
            {"cutoff": cutoff}
        )
        rollups.after_retention(db, cutoff)
        xids = delete_xid_samples_before(db, cutoff)
        sxids = delete_sxid_samples_before(db, cutoff)
    return Deleted(deleted, xids, sxids)


async def delete_samples_before_async(db: Database, cutoff: datetime,
                                      timeout: float) -> Deleted:
    """:func:`delete_samples_before` with a timeout that interrupts the query on expiry.

    Raises ``TimeoutError`` after interrupting the statement if it had started (the store then
    rolls it back; the next run starts over). The database thread is free again on return.
    """
    running: dict[str, Callable[[], None]] = {}
    started = threading.Event()

    def work() -> Deleted:
        running["interrupt"] = db.interrupter()
        started.set()
        return delete_samples_before(db, cutoff)

    task = asyncio.ensure_future(db.run(work))
    try:
        return await asyncio.wait_for(asyncio.shield(task), timeout)
    except TimeoutError:
        if started.is_set():
            running["interrupt"]()
        with contextlib.suppress(StoreError):
            await task  # let the interrupted statement finish unwinding before returning
        raise


def purge_simulated(db: Database) -> int:
    """Delete every ``source='simulated'`` sample, XID and SXid sample and prediction (and forget
    simulated listed-card counts); real rows are never
    touched. Returns the number of (non-XID) sample rows deleted."""
    simulated = {"source": SOURCE_SIMULATED}
    with db.transaction():
        samples = db.modify(
            "DELETE FROM gpu_health_samples WHERE source = $source", simulated
        )
        for table in (XID_TABLE, SXID_TABLE):
            db.execute(f"DELETE FROM {table} WHERE source = $source", simulated)
        db.execute("DELETE FROM gpu_health_predictions WHERE source = $source", simulated)
        db.execute("UPDATE gpu_health_nodes SET listed_cards = NULL, listed_source = NULL "
                   "WHERE listed_source = $source", simulated)
        rollups.after_purge(db, SOURCE_SIMULATED)
    return samples


def simulated_nodes_present(db: Database, node_ids: Sequence[str]) -> list[str]:
    """Which of ``node_ids`` already have simulated samples."""
    if not node_ids:
        return []
    rows = db.fetchall(
        "SELECT DISTINCT node_id FROM gpu_health_samples "
        "WHERE source = $source AND node_id IN (SELECT unnest($nodes::VARCHAR[])) ORDER BY 1",
        {"source": SOURCE_SIMULATED, "nodes": list(node_ids)},
    )
    return [str(r[0]) for r in rows]
