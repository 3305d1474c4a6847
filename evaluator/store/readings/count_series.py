"""What the change-only count tables (``gpu_health_xid_samples``, ``gpu_health_sxid_samples``)
share: a series is written only when its count changes, with no keep-alive row, so its newest
row may be months old and is still the base the next count is compared with. The cache-miss
lookup is therefore not bounded in time, and retention keeps each series' newest row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from gpu_health.evaluator.store.db import Database


def newest_rows(db: Database, table: str, series: Sequence[str], columns: Sequence[str],
                nodes: Iterable[str], sources: Iterable[str]) -> list[tuple[Any, ...]]:
    """``columns`` of the newest row of every series (``series``: its key columns, node_id and
    source among them) of ``nodes`` and ``sources``, in one SELECT.

    The SELECT names the nodes, not the series: a cycle's lookup may hold 500,000 XID series at
    100,000 cards, and passing every key's values cost more than the scan; the caller drops the
    series it did not ask for."""
    keys = ", ".join("x." + c for c in series)
    return db.fetchall(
        f"""
        SELECT DISTINCT ON ({keys}) {", ".join("x." + c for c in columns)}
        FROM {table} x
        WHERE x.node_id IN (SELECT unnest($nodes::VARCHAR[]))
          AND x.source IN (SELECT unnest($sources::VARCHAR[]))
        ORDER BY {keys}, x.sampled_at DESC
        """,
        {"nodes": sorted(set(nodes)), "sources": sorted(set(sources))},
    )


def delete_before_keeping_newest(db: Database, table: str, series: Sequence[str],
                                 cutoff: datetime) -> int:
    """Retention: delete the rows sampled before ``cutoff`` except each series' newest row."""
    same = " AND ".join(f"n.{c} = d.{c}" for c in series)
    return db.modify(
        f"""
        DELETE FROM {table} d
        WHERE d.sampled_at < $cutoff AND EXISTS (
            SELECT 1 FROM {table} n WHERE {same} AND n.sampled_at > d.sampled_at)
        """,
        {"cutoff": cutoff},
    )
