"""The first-start history import's marker, ``gpu_health_history_imports``.

The import runs only on a store without real samples, and writes for minutes (15 chunks of a
day each for 15 days). A process stopped half-way (SIGTERM, OOM kill, power) used to leave a
store that *holds real samples*, so the next start skipped the import and the live source
skipped everything older than ``max_catchup``: 815,466 rows instead of 939,312, 4 predictions
instead of 302. The marker is written before the first row and completed after the
last replay; a marker left open means the import did not finish, and everything real it wrote
is removed before it runs again (the store held no real data before it began).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.rollup_sql import EDGES

TABLE = "gpu_health_history_imports"


@dataclass(frozen=True, slots=True)
class Marker:
    started_at: datetime
    since: datetime
    until: datetime


def begin(db: Database, now: datetime, since: datetime, until: datetime) -> None:
    db.execute(f"INSERT INTO {TABLE} (started_at, since, until) VALUES ($now, $since, $until)",
               {"now": now, "since": since,
                "until": until})


def finish(db: Database, now: datetime) -> None:
    db.execute(f"UPDATE {TABLE} SET completed_at = $now WHERE completed_at IS NULL",
               {"now": now})


def interrupted(db: Database) -> Marker | None:
    """The import that began and never completed, if any."""
    row = db.fetchone(f"SELECT started_at, since, until FROM {TABLE} WHERE completed_at IS NULL "
                      "ORDER BY started_at DESC LIMIT 1")
    return None if row is None else Marker(*row)


def undo(db: Database) -> int:
    """Remove every real row an unfinished import wrote (samples, Xid and SXid counts, the replay's
    predictions and their window edges) and its open marker; returns the sample rows removed."""
    with db.transaction():
        row = db.fetchone("SELECT count(*) FROM gpu_health_samples WHERE source = 'real'")
        db.execute(f"DELETE FROM {EDGES} WHERE prediction_id IN "
                   "(SELECT id FROM gpu_health_predictions WHERE source = 'real')")
        for table in ("gpu_health_predictions", "gpu_health_xid_samples",
                      "gpu_health_sxid_samples", "gpu_health_samples"):
            db.execute(f"DELETE FROM {table} WHERE source = 'real'")
        db.execute(f"DELETE FROM {TABLE} WHERE completed_at IS NULL")
    return int(row[0]) if row else 0
