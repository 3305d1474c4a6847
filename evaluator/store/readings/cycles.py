"""One scrape cycle's writes as one transaction: samples, XID and SXid samples, and changed node
records.

A cycle commits whole or not at all, so a crash (even ``kill -9``) mid-cycle loses at most that
cycle and the file reopens cleanly (DuckDB replays or discards the WAL on open). Nothing to
write means no statement at all: the steady state must cost zero DB statements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpu_health.evaluator.model import Sample, SxidSample, XidSample
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.maintenance import NodeRecord, upsert_nodes
from gpu_health.evaluator.store.readings.samples import insert_samples
from gpu_health.evaluator.store.readings.sxid_samples import insert_sxid_samples
from gpu_health.evaluator.store.readings.xid_samples import insert_xid_samples


def write_cycle(db: Database, samples: Sequence[Sample], nodes: Sequence[NodeRecord] = (),
                xids: Sequence[XidSample] = (), sxids: Sequence[SxidSample] = ()) -> int:
    """Insert ``samples``, ``xids`` and ``sxids`` and upsert ``nodes`` atomically; returns the
    number of sample rows.

    Each non-empty batch is a single statement (already atomic), so BEGIN/COMMIT are only added
    when there are two or more statements to bind together.
    """
    steps: list[Callable[[], object]] = []
    if samples:
        steps.append(lambda: insert_samples(db, samples))
    if xids:
        steps.append(lambda: insert_xid_samples(db, xids))
    if sxids:
        steps.append(lambda: insert_sxid_samples(db, sxids))
    if nodes:
        steps.append(lambda: upsert_nodes(db, nodes))
    if len(steps) == 1:
        steps[0]()
    elif steps:
        with db.transaction():
            for step in steps:
                step()
    return len(samples)
