"""What the statistics read from the samples alone: cards, first fault events, first evidence.

Nothing here depends on the predictions, so a caller that measures many rule versions over one
period (a calibration) computes it once (:func:`sample_facts`) and hands it to
:func:`evaluator.store.stats.raw_stats` for each version; the live statistics compute it on the
way. The queries, per period of one source (and node set):

- one aggregate over the period's samples per card (node, index, UUID): monitorable or not,
  first/last sample (exposure, observed span), min/max uncorrectable count, from the sealed
  days' rollups and the raw rows of the rest;
- the first fault event per monitorable card: ``lag()`` over the known uncorrectable counts,
  run ONLY for the cards whose count moved in the period (max > min from the aggregate: a card
  whose count never changed has no increase point), plus, when the definition lists
  ``fault_xids``, the memory-XID events (``xid_samples.XID_EVENT``) of those codes. ECC events
  need both rows in the period (the first sample of a card in the period has no predecessor
  there); an XID event's predecessor may lie before the period (XID rows are written on change
  only). XID events of cards that are not monitorable are dropped, as ECC ones are;
- a card's first evidence of a fault: its earliest row, up to the period's end, with a known
  uncorrectable count above 0, or its earliest memory-XID event of the definition.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from evaluator.store.db import Database
from evaluator.store.rollup_sql import CAND, FIRST_INCREASE, period_segments
from evaluator.store.rollups import DAY, EPOCH, covered, day_floor
from evaluator.store.sql import compose
from evaluator.store.xid_samples import TABLE as XID_TABLE
from evaluator.store.xid_samples import XID_EVENT, XID_PREV
from gpu_health.clock import from_naive_utc, to_naive_utc
from gpu_health.contract import COUNTER_KEYS

Card = tuple[str, int, "str | None"]
Event = tuple[str, int, "str | None", datetime]  # a card's first fault event in the period


def node_filter(nodes: frozenset[str] | None, column: str = "node_id") -> str:
    return "" if nodes is None else f" AND {column} IN (SELECT unnest($nodes::VARCHAR[]))"


def base_params(since: datetime, until: datetime, source: str,
                nodes: frozenset[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"since": to_naive_utc(since), "until": to_naive_utc(until),
                              "source": source}
    if nodes is not None:
        params["nodes"] = sorted(nodes)
    return params


@dataclass(frozen=True, slots=True)
class SampleFacts:
    """The sample-derived half of the statistics of one period and fault definition."""

    since: datetime
    until: datetime
    source: str
    nodes: frozenset[str] | None
    fault_xids: tuple[int, ...]
    cards: tuple[tuple[Any, ...], ...]  # see :func:`period_cards`
    events: tuple[Event, ...]  # first fault event per monitorable card, in time order
    evidence: dict[Card, datetime]  # first evidence of the cards in ``evidence_of``
    evidence_of: frozenset[Card]

    @property
    def monitorable(self) -> list[tuple[Any, ...]]:
        return [c for c in self.cards if c[3]]

    def matches(self, since: datetime, until: datetime, source: str,
                nodes: frozenset[str] | None, fault_xids: tuple[int, ...]) -> bool:
        return (self.since, self.until, self.source, self.nodes, self.fault_xids) == (
            since, until, source, nodes, fault_xids)


def sample_facts(db: Database, *, since: datetime, until: datetime, source: str,
                 nodes: frozenset[str] | None, fault_xids: tuple[int, ...],
                 evidence_of: Iterable[Card] = ()) -> SampleFacts:
    """Cards, first fault events, and the first evidence of the faulty cards and of
    ``evidence_of`` (e.g. every card a prediction was made for)."""
    params = base_params(since, until, source, nodes)
    cards = tuple(tuple(c) for c in period_cards(db, params, nodes))
    monitorable = [c for c in cards if c[3]]
    moved = [c for c in monitorable if c[6] is not None and c[7] is not None and c[7] > c[6]]
    events = first_fault_events(db, params, moved, fault_xids,
                                {(c[0], c[1], c[2]) for c in monitorable}, nodes)
    wanted = frozenset({(e[0], e[1], e[2]) for e in events} | set(evidence_of))
    return SampleFacts(since, until, source, nodes, fault_xids, cards, events,
                       first_evidence(db, params, set(wanted), fault_xids), wanted)


# {segments}: the candidates' period segments; {xids}: their XID evidence, or nothing.
_EVIDENCE = """
WITH cand AS (
    SELECT unnest($c_nodes::VARCHAR[]) AS node_id, unnest($c_idx::INTEGER[]) AS gpu_index,
           unnest($c_uuid::VARCHAR[]) AS gpu_uuid
),
ev AS (
    SELECT node_id, gpu_index, gpu_uuid, min(pos_at) AS seen_at
    FROM ({segments}) AS s
    WHERE pos_at IS NOT NULL
    GROUP BY node_id, gpu_index, gpu_uuid{xids}
)
SELECT node_id, gpu_index, gpu_uuid, min(seen_at) FROM ev GROUP BY node_id, gpu_index, gpu_uuid
"""
_EVIDENCE_XIDS = f"""
    UNION ALL
    SELECT node_id, gpu_index, gpu_uuid, min(sampled_at)
    FROM (SELECT x.node_id, x.gpu_index, x.gpu_uuid, x.sampled_at, x.count, {XID_PREV} AS prev
          FROM {XID_TABLE} x
          WHERE x.source = $source AND x.sampled_at <= $until
            AND x.xid IN (SELECT unnest($xids::INTEGER[])) AND EXISTS (
                SELECT 1 FROM cand c WHERE c.node_id = x.node_id AND c.gpu_index = x.gpu_index
                                       AND c.gpu_uuid IS NOT DISTINCT FROM x.gpu_uuid)) AS xs
    WHERE {XID_EVENT}
    GROUP BY node_id, gpu_index, gpu_uuid"""


def first_evidence(db: Database, params: dict[str, Any], cards: set[Card],
                   fault_xids: tuple[int, ...]) -> dict[Card, datetime]:
    """Per card, its earliest fault evidence up to ``$until`` (absent: none seen)."""
    if not cards:
        return {}
    ordered = sorted(cards, key=lambda c: (c[0], c[1], c[2] or ""))
    query: dict[str, Any] = {"source": params["source"], "until": params["until"],
                             "since": to_naive_utc(EPOCH),  # since the beginning
                             "c_nodes": [c[0] for c in ordered],
                             "c_idx": [c[1] for c in ordered],
                             "c_uuid": [c[2] for c in ordered]}
    if fault_xids:
        query["xids"] = list(fault_xids)
    sql = compose(_EVIDENCE, segments=period_segments(cards=CAND),
                  xids=_EVIDENCE_XIDS if fault_xids else "")
    query = period_params(db, query)
    return {(str(n), int(i), None if u is None else str(u)): from_naive_utc(at)
            for n, i, u, at in db.fetchall(sql, query)}


def period_params(db: Database, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` plus the sealed days [$dlo, $dhi) inside the period (empty: dlo = dhi)."""
    since, until = from_naive_utc(params["since"]), from_naive_utc(params["until"])
    dlo = day_floor(since) + (DAY if day_floor(since) < since else timedelta(0))
    dhi = max(dlo, covered(db, until))
    return params | {"dlo": to_naive_utc(dlo), "dhi": to_naive_utc(dhi)}


def period_cards(db: Database, params: dict[str, Any], nodes: frozenset[str] | None) -> list[Any]:
    """(node, index, uuid, monitorable, first, last, min unc, max unc) per card in the period,
    from the sealed days' rollups and the raw rows of the rest."""
    any_known = " + ".join(f"n_{c}" for c in COUNTER_KEYS)
    segments = period_segments(nodes=node_filter(nodes))
    return db.fetchall(
        f"""SELECT node_id, gpu_index, gpu_uuid, bool_or({any_known} > 0), min(first_at),
               max(last_at), min(unc_min), max(unc_max)
        FROM ({segments}) AS s
        GROUP BY node_id, gpu_index, gpu_uuid""", period_params(db, params),
    )


_ECC_EVENTS = f"""
cand AS (
    SELECT unnest($c_nodes::VARCHAR[]) AS node_id, unnest($c_idx::INTEGER[]) AS gpu_index,
           unnest($c_uuid::VARCHAR[]) AS gpu_uuid
),
segs AS ({period_segments(cards=CAND)}),
ecc AS (
    SELECT node_id, gpu_index, gpu_uuid, event_at AS fault_at
    FROM ({compose(FIRST_INCREASE, key="node_id, gpu_index, gpu_uuid", segs="segs")}) AS f
)"""


def _xid_events(nodes: str) -> str:
    """The first XID fault of each card (``nodes``: an optional node filter on x)."""
    return f"""
xev AS (
    SELECT node_id, gpu_index, gpu_uuid, min(sampled_at) AS fault_at
    FROM (SELECT x.node_id, x.gpu_index, x.gpu_uuid, x.sampled_at, x.count,
                 {XID_PREV} AS prev
          FROM {XID_TABLE} x
          WHERE x.source = $source AND x.sampled_at <= $until
            AND x.xid IN (SELECT unnest($xids::INTEGER[])){nodes}) AS xs
    WHERE {XID_EVENT} AND sampled_at >= $since
    GROUP BY node_id, gpu_index, gpu_uuid
)"""


_FIRST_FAULT = """
WITH {events}
SELECT node_id, gpu_index, gpu_uuid, min(fault_at) AS fault_at
FROM ({union}) AS u
GROUP BY node_id, gpu_index, gpu_uuid
ORDER BY fault_at, node_id, gpu_index
"""


def first_fault_events(db: Database, params: dict[str, Any], moved: Sequence[Any],
                       fault_xids: tuple[int, ...], monitorable: set[Card],
                       nodes: frozenset[str] | None) -> tuple[Event, ...]:
    """First fault event per monitorable card; one statement, only the parts that can find
    something (no moved card: no ECC scan; ECC-only definition: no XID scan)."""
    events: list[str] = []
    query: dict[str, Any] = {k: params[k] for k in ("source", "since", "until")}
    if moved:
        query = period_params(db, query)
        events.append(_ECC_EVENTS)
        query |= {"c_nodes": [c[0] for c in moved], "c_idx": [c[1] for c in moved],
                  "c_uuid": [c[2] for c in moved]}
    if fault_xids:
        events.append(_xid_events(node_filter(nodes, "x.node_id")))
        query["xids"] = list(fault_xids)
        if nodes is not None:
            query["nodes"] = params["nodes"]
    if not events:
        return ()
    union = " UNION ALL ".join(
        f"SELECT * FROM {name}" for name in (("ecc",) if moved else ()) + (
            ("xev",) if fault_xids else ()))
    rows = db.fetchall(compose(_FIRST_FAULT, events=",".join(events), union=union), query)
    return tuple((str(n), int(i), None if u is None else str(u), from_naive_utc(at))
                 for n, i, u, at in rows if (n, i, u) in monitorable)
