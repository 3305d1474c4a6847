"""What the change-only count tables (``gpu_health_xid_samples``, ``gpu_health_sxid_samples``)
share: a series is written only when its count changes, with no keep-alive row, so its newest
row may be months old and is still the base the next count is compared with. The cache-miss
lookup is therefore not bounded in time, and retention keeps each series' newest row."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from gpu_health.errors import StoreError
from gpu_health.evaluator.store.db import Database


class _SeriesKey(Hashable, Protocol):
    @property
    def node_id(self) -> str: ...

    @property
    def source(self) -> str: ...


class _Row(Protocol):
    @property
    def key(self) -> Hashable: ...


K = TypeVar("K", bound=_SeriesKey)
R = TypeVar("R", bound=_Row)


def newest_rows(db: Database, table: str, series: Sequence[str], columns: Sequence[str],
                keys: Sequence[K], build: Callable[[tuple[Any, ...]], R]) -> dict[K, R]:
    """The newest stored row of each of ``keys`` (``series``: a key's columns, node_id and
    source among them), built from ``columns`` by ``build``, in one SELECT.

    The SELECT names the keys' nodes, not the keys: a cycle's lookup may hold 500,000 XID series
    at 100,000 cards, and passing every key's values cost more than the scan; the series of
    those nodes that were not asked for are dropped here."""
    if not keys:
        return {}
    names = ", ".join("x." + c for c in series)
    rows = db.fetchall(
        f"""
        SELECT DISTINCT ON ({names}) {", ".join("x." + c for c in columns)}
        FROM {table} x
        WHERE x.node_id IN (SELECT unnest($nodes::VARCHAR[]))
          AND x.source IN (SELECT unnest($sources::VARCHAR[]))
        ORDER BY {names}, x.sampled_at DESC
        """,
        {"nodes": sorted({k.node_id for k in keys}), "sources": sorted({k.source for k in keys})},
    )
    wanted = set(keys)
    result: dict[K, R] = {}
    for row in rows:
        built = build(row)
        if built.key in wanted:
            result[built.key] = built
    return result


def sampled_at(value: object, table: str) -> datetime:
    """A row's ``sampled_at`` as the store gives it (a datetime), else a StoreError."""
    if not isinstance(value, datetime):
        raise StoreError(f"unexpected {table} row shape: {value!r}", reason="row_shape")
    return value


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
