"""SQL for the prediction statistics: three set-based queries, never one query per card.

1. prediction counts by window length and status (t0 in the period);
2. one aggregate over the period's samples per card (node, index, UUID): monitorable or not,
   first/last sample (exposure, observed span), min/max uncorrectable count;
3. the fault-event scan: ``lag()`` over the known uncorrectable counts, run ONLY for the cards
   whose count moved in the period (max > min from query 2: a card whose count never changed has
   no increase point), joined to the predictions whose window held the card's first fault.

The reference design recalled per card in a loop and admitted it would not scale; here the
window-function pass touches only the few cards that actually had a fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from evaluator.store.db import Database
from gpu_health.clock import from_naive_utc, to_naive_utc
from gpu_health.contract import COUNTER_KEYS


@dataclass(frozen=True, slots=True)
class Fault:
    """A monitorable card's first uncorrectable-ECC increase point in the period."""

    node_id: str
    gpu_index: int
    gpu_uuid: str | None
    first_fault_at: datetime
    predicted_by: frozenset[int]  # window_days of predictions whose window held the fault


@dataclass(frozen=True, slots=True)
class RawStats:
    """Counts the pure statistics are computed from (see :mod:`evaluator.stats`)."""

    status_counts: dict[int, dict[str, int]]  # window_days -> status -> count
    rule_versions: dict[int, tuple[str, ...]]  # window_days -> versions counted
    monitorable_cards: int
    exposure_seconds: float
    first_sample: datetime | None
    last_sample: datetime | None
    faults: tuple[Fault, ...]


def _node_filter(nodes: frozenset[str] | None, column: str = "node_id") -> str:
    return "" if nodes is None else f" AND {column} IN (SELECT unnest($nodes::VARCHAR[]))"


def _base_params(since: datetime, until: datetime, source: str,
                 nodes: frozenset[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"since": to_naive_utc(since), "until": to_naive_utc(until),
                              "source": source}
    if nodes is not None:
        params["nodes"] = sorted(nodes)
    return params


def raw_stats(db: Database, *, since: datetime, until: datetime, source: str,
              nodes: frozenset[str] | None) -> RawStats:
    """All numbers for one period [since, until] of one source (and node set)."""
    params = _base_params(since, until, source, nodes)
    counts: dict[int, dict[str, int]] = {}
    versions: dict[int, tuple[str, ...]] = {}
    for window_days, status, n, vs in db.fetchall(
        f"""SELECT window_days, status, count(*), list(DISTINCT rule_version ORDER BY rule_version)
        FROM gpu_health_predictions
        WHERE source = $source AND t0 >= $since AND t0 <= $until{_node_filter(nodes)}
        GROUP BY window_days, status""", params,
    ):
        counts.setdefault(int(window_days), {})[str(status)] = int(n)
        merged = set(versions.get(int(window_days), ())) | {str(v) for v in vs}
        versions[int(window_days)] = tuple(sorted(merged))
    cards = _cards(db, params, nodes)
    monitorable = [c for c in cards if c[3]]
    moved = [c for c in monitorable if c[6] is not None and c[7] is not None and c[7] > c[6]]
    return RawStats(
        status_counts=counts,
        rule_versions=versions,
        monitorable_cards=len(monitorable),
        exposure_seconds=sum((c[5] - c[4]).total_seconds() for c in monitorable),
        first_sample=min((from_naive_utc(c[4]) for c in cards), default=None),
        last_sample=max((from_naive_utc(c[5]) for c in cards), default=None),
        faults=_faults(db, params, moved),
    )


def _cards(db: Database, params: dict[str, Any], nodes: frozenset[str] | None) -> list[Any]:
    """(node, index, uuid, monitorable, first, last, min unc, max unc) per card in the period."""
    any_known = " OR ".join(f"{c} IS NOT NULL" for c in COUNTER_KEYS)
    return db.fetchall(
        f"""SELECT node_id, gpu_index, gpu_uuid, bool_or({any_known}), min(sampled_at),
               max(sampled_at), min(ecc_uncorrected_total), max(ecc_uncorrected_total)
        FROM gpu_health_samples
        WHERE source = $source AND sampled_at >= $since AND sampled_at <= $until
              {_node_filter(nodes)}
        GROUP BY node_id, gpu_index, gpu_uuid""", params,
    )


_FAULTS = """
WITH cand AS (
    SELECT unnest($c_nodes::VARCHAR[]) AS node_id, unnest($c_idx::INTEGER[]) AS gpu_index,
           unnest($c_uuid::VARCHAR[]) AS gpu_uuid
),
series AS (
    SELECT s.node_id, s.gpu_index, s.gpu_uuid, s.sampled_at,
           s.ecc_uncorrected_total AS unc,
           lag(s.ecc_uncorrected_total) OVER (
               PARTITION BY s.node_id, s.gpu_index, s.gpu_uuid ORDER BY s.sampled_at
           ) AS prev
    FROM gpu_health_samples s
    SEMI JOIN cand c ON c.node_id = s.node_id AND c.gpu_index = s.gpu_index
                    AND c.gpu_uuid IS NOT DISTINCT FROM s.gpu_uuid
    WHERE s.source = $source AND s.sampled_at >= $since AND s.sampled_at <= $until
      AND s.ecc_uncorrected_total IS NOT NULL
),
first_fault AS (
    SELECT node_id, gpu_index, gpu_uuid, min(sampled_at) AS at
    FROM series WHERE unc > prev GROUP BY node_id, gpu_index, gpu_uuid
)
SELECT f.node_id, f.gpu_index, f.gpu_uuid, f.at,
       list(DISTINCT p.window_days) FILTER (WHERE p.window_days IS NOT NULL)
FROM first_fault f
LEFT JOIN gpu_health_predictions p
  ON p.node_id = f.node_id AND p.gpu_index = f.gpu_index
 AND p.gpu_uuid IS NOT DISTINCT FROM f.gpu_uuid AND p.source = $source
 AND p.t0 < f.at AND f.at <= p.window_end
GROUP BY f.node_id, f.gpu_index, f.gpu_uuid, f.at
ORDER BY f.at, f.node_id, f.gpu_index
"""


def _faults(db: Database, params: dict[str, Any], moved: Sequence[Any]) -> tuple[Fault, ...]:
    if not moved:
        return ()
    rows = db.fetchall(
        _FAULTS,
        {
            "source": params["source"], "since": params["since"], "until": params["until"],
            "c_nodes": [c[0] for c in moved], "c_idx": [c[1] for c in moved],
            "c_uuid": [c[2] for c in moved],
        },
    )
    return tuple(
        Fault(str(n), int(i), None if u is None else str(u), from_naive_utc(at),
              frozenset(int(w) for w in (windows or [])))
        for n, i, u, at, windows in rows
    )
