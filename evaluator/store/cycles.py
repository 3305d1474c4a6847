"""One scrape cycle's writes as one transaction: the sample batch plus changed node records.

A cycle commits whole or not at all, so a crash (even ``kill -9``) mid-cycle loses at most that
cycle and the file reopens cleanly (DuckDB replays or discards the WAL on open). Nothing to
write means no statement at all: the steady state must cost zero DB statements.
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluator.model import Sample
from evaluator.store.db import Database
from evaluator.store.maintenance import NodeRecord, upsert_nodes
from evaluator.store.samples import insert_samples


def write_cycle(db: Database, samples: Sequence[Sample], nodes: Sequence[NodeRecord] = ()) -> int:
    """Insert ``samples`` and upsert ``nodes`` atomically; returns the number of sample rows.

    A lone batch is a single statement (already atomic), so BEGIN/COMMIT are only added when
    there are two statements to bind together.
    """
    if not samples and not nodes:
        return 0
    if not nodes:
        return insert_samples(db, samples)
    if not samples:
        upsert_nodes(db, nodes)
        return 0
    with db.transaction():
        written = insert_samples(db, samples)
        upsert_nodes(db, nodes)
    return written
