"""What the recommended-action policy reads per card (:mod:`gpu_health.evaluator.rules.actions`).

Two statements: the newest sample of each card in the last week (rows are written whole,
change-only with a keep-alive, so the newest row holds the card's latest known row-remap state,
recovery action and pending page retirement),
and the memory-Xid fault events of each card within the policy's window (the same event
definition as the statistics: :data:`gpu_health.evaluator.store.readings.xid_samples.XID_EVENT`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

from gpu_health.contract import MEMORY_XIDS, RECOVERY_ACTIONS
from gpu_health.evaluator.model import CardSlot, PhysicalCard
from gpu_health.evaluator.rules.actions import CardState
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.xid_samples import TABLE as XID_TABLE
from gpu_health.evaluator.store.readings.xid_samples import XID_EVENT, XID_PREV

LOOKBACK: Final = timedelta(days=7)


def card_states(db: Database, *, now: datetime, source: str, xid_window: timedelta,
                nodes: Sequence[str] | None = None) -> dict[PhysicalCard, CardState]:
    """Per card (node, index, UUID of its newest row) its :class:`CardState`."""
    params: dict[str, object] = {"source": source, "now": now,
                                 "since": now - LOOKBACK}
    where = ""
    if nodes is not None:
        params["nodes"] = list(nodes)
        where = " AND node_id IN (SELECT unnest($nodes::VARCHAR[]))"
    rows = db.fetchall(
        f"""SELECT DISTINCT ON (node_id, gpu_index) node_id, gpu_index, gpu_uuid,
               remapped_rows_pending, remapped_rows_failure, remap_banks_none,
               recovery_action, retired_pages_pending
        FROM gpu_health_samples
        WHERE source = $source AND sampled_at <= $now AND sampled_at >= $since{where}
        ORDER BY node_id, gpu_index, sampled_at DESC""", params)
    xid_params = {k: v for k, v in params.items() if k != "since"}
    xids = _recent_xids(db, xid_params | {"xsince": now - xid_window,
                                          "xids": list(MEMORY_XIDS)}, where)
    return {(str(n), int(i), None if u is None else str(u)):
            CardState(pending, failure, none, xids.get((str(n), int(i)), frozenset()),
                      _action_name(action), pages)
            for n, i, u, pending, failure, none, action, pages in rows}


def _action_name(value: int | None) -> str | None:
    """The stored NVML value as its name; a value this evaluator does not know is unknown."""
    if value is None or not 0 <= value < len(RECOVERY_ACTIONS):
        return None
    return RECOVERY_ACTIONS[value]


def _recent_xids(db: Database, params: dict[str, object],
                 where: str) -> dict[CardSlot, frozenset[int]]:
    rows = db.fetchall(
        f"""SELECT node_id, gpu_index, array_agg(DISTINCT xid)
        FROM (SELECT node_id, gpu_index, xid, sampled_at, count, {XID_PREV} AS prev
              FROM {XID_TABLE}
              WHERE source = $source AND sampled_at <= $now
                AND xid IN (SELECT unnest($xids::INTEGER[])){where}) AS x
        WHERE {XID_EVENT} AND sampled_at >= $xsince
        GROUP BY node_id, gpu_index""", params)
    return {(str(n), int(i)): frozenset(int(x) for x in xs) for n, i, xs in rows}
