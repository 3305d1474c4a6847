"""What the statistics read from the samples alone: cards, first fault events, first evidence.

Nothing here depends on the predictions, so a caller that measures many rule versions over one
period (a calibration) computes it once (:func:`sample_facts`) and hands it to
:func:`gpu_health.evaluator.store.statistics.stats_queries.raw_stats` for each version; the live
statistics compute it on the way. The queries, per period of one source (and node set): ONE
statement that reads each of the period's segments once (:func:`period_facts`):

- one aggregate over the period's segments per card (node, index, UUID): monitorable or not,
  first/last sample (exposure, observed span), min/max uncorrectable count, from the sealed
  days' rollups and the raw rows of the rest;
- the first fault event per monitorable card: the increase points of the known uncorrectable
  counts (``FIRST_INCREASE`` over the same segments), taken ONLY for the cards whose count moved
  in the period (max > min from the aggregate: a card whose count never changed has no
  increase point), plus, when the definition lists ``fault_xids``, the memory-XID events
  (``xid_samples.XID_EVENT``) of those codes. ECC events need both rows in the period (the
  first sample of a card in the period has no predecessor there); an XID event's predecessor
  may lie before the period (XID rows are written on change only). XID events of cards that
  are not monitorable are dropped, as ECC ones are;
- each card's first evidence of a fault: its earliest row, up to the period's end, with a
  known uncorrectable count above 0, or its earliest memory-XID event of the definition. The
  period's part comes from the same segments (``pos_at``); the part before it from the sealed
  days before the period and the unsealed raw rows before ``since``.

:func:`first_evidence` gives the same for cards without samples in the period (a caller's
``evidence_of``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from gpu_health.contract import COUNTER_KEYS
from gpu_health.evaluator.model import FirstFault, PhysicalCard
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.rollups import DAY, EPOCH, covered, day_floor, watermark
from gpu_health.evaluator.store.readings.xid_samples import TABLE as XID_TABLE
from gpu_health.evaluator.store.readings.xid_samples import XID_EVENT, XID_PREV
from gpu_health.evaluator.store.rollup_sql import (
    CAND,
    DAYS,
    FIRST_INCREASE,
    period_days,
    period_raw,
    period_segments,
)
from gpu_health.evaluator.store.sql import fill_statement


def node_filter(nodes: frozenset[str] | None, column: str = "node_id") -> str:
    return "" if nodes is None else f" AND {column} IN (SELECT unnest($nodes::VARCHAR[]))"


def base_params(since: datetime, until: datetime, source: str,
                nodes: frozenset[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"since": since, "until": until,
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
    events: tuple[FirstFault, ...]  # first fault event per monitorable card, in time order
    evidence: dict[PhysicalCard, datetime]  # first evidence of the cards in ``evidence_of``
    evidence_of: frozenset[PhysicalCard]  # the period's cards and the caller's ``evidence_of``

    @property
    def monitorable(self) -> list[tuple[Any, ...]]:
        return [c for c in self.cards if c[3]]

    def matches(self, since: datetime, until: datetime, source: str,
                nodes: frozenset[str] | None, fault_xids: tuple[int, ...]) -> bool:
        return (self.since, self.until, self.source, self.nodes, self.fault_xids) == (
            since, until, source, nodes, fault_xids)


def sample_facts(db: Database, *, since: datetime, until: datetime, source: str,
                 nodes: frozenset[str] | None, fault_xids: tuple[int, ...],
                 evidence_of: Iterable[PhysicalCard] = ()) -> SampleFacts:
    """Cards, first fault events and first evidence of every card in the period (one pass over
    its segments), and the first evidence of the other cards of ``evidence_of`` (e.g. every
    card a prediction was made for)."""
    params = base_params(since, until, source, nodes)
    rows = period_facts(db, params, nodes, fault_xids)
    keyed = [(_card(r), r) for r in rows]
    events = sorted(((*card, r[8]) for card, r in keyed
                     if r[3] and r[8] is not None),
                    key=lambda e: (e[3], e[0], e[1], e[2] or ""))
    evidence = {card: r[9] for card, r in keyed if r[9] is not None}
    period = {card for card, _ in keyed}
    others = set(evidence_of) - period
    evidence |= first_evidence(db, params, others, fault_xids)
    return SampleFacts(since, until, source, nodes, fault_xids, tuple(tuple(r[:8]) for r in rows),
                       tuple(events), evidence, frozenset(period | others))


def _card(row: Sequence[Any]) -> PhysicalCard:
    """A row's leading (node, index, UUID) as a card key."""
    return str(row[0]), int(row[1]), None if row[2] is None else str(row[2])


# {segments}: the candidates' period segments; {xid_cte}, {xids}: their XID events, or nothing.
_EVIDENCE = """
WITH cand AS (
    SELECT unnest($c_nodes::VARCHAR[]) AS node_id, unnest($c_idx::INTEGER[]) AS gpu_index,
           unnest($c_uuid::VARCHAR[]) AS gpu_uuid
){xid_cte},
ev AS (
    SELECT node_id, gpu_index, gpu_uuid, min(pos_at) AS seen_at
    FROM ({segments}) AS s
    WHERE pos_at IS NOT NULL
    GROUP BY node_id, gpu_index, gpu_uuid{xids}
)
SELECT node_id, gpu_index, gpu_uuid, min(seen_at) FROM ev GROUP BY node_id, gpu_index, gpu_uuid
"""
_EVIDENCE_XIDS: Final = """
    UNION ALL
    SELECT node_id, gpu_index, gpu_uuid, min(sampled_at) FROM xall
    GROUP BY node_id, gpu_index, gpu_uuid"""
_CAND_X: Final = (" AND EXISTS (SELECT 1 FROM cand c WHERE c.node_id = x.node_id"
                  " AND c.gpu_index = x.gpu_index AND c.gpu_uuid IS NOT DISTINCT FROM x.gpu_uuid)")


def first_evidence(db: Database, params: dict[str, Any], cards: set[PhysicalCard],
                   fault_xids: tuple[int, ...]) -> dict[PhysicalCard, datetime]:
    """Per card, its earliest fault evidence up to ``$until`` (absent: none seen)."""
    if not cards:
        return {}
    ordered = sorted(cards, key=lambda c: (c[0], c[1], c[2] or ""))
    query: dict[str, Any] = {"source": params["source"], "until": params["until"],
                             "since": EPOCH,  # since the beginning
                             "c_nodes": [c[0] for c in ordered],
                             "c_idx": [c[1] for c in ordered],
                             "c_uuid": [c[2] for c in ordered]}
    if fault_xids:
        query["xids"] = list(fault_xids)
    sql = fill_statement(_EVIDENCE, segments=period_segments(cards=CAND),
                  xid_cte=_xid_cte(_CAND_X) if fault_xids else "",
                  xids=_EVIDENCE_XIDS if fault_xids else "")
    query = period_params(db, query)
    return {_card(row): row[3] for row in db.fetchall(sql, query)}


def period_params(db: Database, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` plus the sealed days [$dlo, $dhi) inside the period (empty: dlo = dhi)."""
    since, until = params["since"], params["until"]
    dlo = day_floor(since) + (DAY if day_floor(since) < since else timedelta(0))
    dhi = max(dlo, covered(db, until))
    return params | {"dlo": dlo, "dhi": dhi}


_KEY: Final = "node_id, gpu_index, gpu_uuid"
_ANY_KNOWN: Final = " + ".join(f"n_{c}" for c in COUNTER_KEYS)

# One pass over the period's segments: the sealed days are read once where the engine gains by
# it (materialised, ``Dialect.facts_days``: the cards' aggregate and the moved cards' increase
# points both use them); the raw rows after the watermark (and before the first whole day) are
# scanned twice, the second time only for the moved cards, whose window pass over them is all
# the increase points need (a window over every card's raw rows was 0.21 s of 0.25 at 32,768
# cards). Evidence before the period comes
# from the sealed days before it ($dlo; a day holding $since may reach past it, hence
# ``pos_at <= $until``) and the raw rows between the watermark and $since (none once $since is
# sealed). One row per card of the period: the per-part rows are folded by GROUP BY, which,
# unlike a join, matches a NULL UUID with itself on both engines without a nested loop.
_FACTS = """
WITH days AS {materialized} ({days_part}),
cards AS (
    SELECT {key}, bool_or({any_known} > 0) AS mon, min(first_at) AS first_at,
           max(last_at) AS last_at, min(unc_min) AS unc_min, max(unc_max) AS unc_max,
           min(pos_at) AS seen_at
    FROM (SELECT * FROM days UNION ALL {raw_part}) AS s
    GROUP BY {key}
),
cand AS (SELECT {key} FROM cards WHERE mon AND unc_max > unc_min),
msegs AS (
    SELECT * FROM days g WHERE TRUE{cand}
    UNION ALL {moved_raw}
),
ecc AS ({first_increase}){xid_cte}
SELECT {key}, bool_or(mon), min(first_at), max(last_at), min(unc_min), max(unc_max),
       min(fault_at), min(seen_at)
FROM (
    SELECT {key}, mon, first_at, last_at, unc_min, unc_max, NULL::TIMESTAMP AS fault_at,
           seen_at
    FROM cards
    UNION ALL
    SELECT {key}, {nothing}, event_at, NULL::TIMESTAMP FROM ecc
    UNION ALL
    SELECT {key}, {nothing}, NULL::TIMESTAMP, pos_at FROM {days}
    WHERE source = $source AND day < $dlo AND pos_at <= $until{nodes}
    UNION ALL
    SELECT {key}, {nothing}, NULL::TIMESTAMP, sampled_at FROM gpu_health_samples
    WHERE source = $source AND sampled_at >= $sealed AND sampled_at < $since
      AND ecc_uncorrected_total > 0{nodes}{xid_rows}
) AS u
GROUP BY {key}
HAVING bool_or(mon) IS NOT NULL
"""
_NOTHING: Final = ("NULL::BOOLEAN, NULL::TIMESTAMP, NULL::TIMESTAMP, NULL::BIGINT, "
                   "NULL::BIGINT")


def _xid_cte(where: str) -> str:
    """Every memory-XID fault event of the definition up to ``$until`` (``where``: an optional
    condition on the XID rows x: nodes, cards); those in the period are fault events, all of
    them evidence."""
    return f""",
xall AS (
    SELECT node_id, gpu_index, gpu_uuid, sampled_at
    FROM (SELECT x.node_id, x.gpu_index, x.gpu_uuid, x.sampled_at, x.count,
                 {XID_PREV} AS prev
          FROM {XID_TABLE} x
          WHERE x.source = $source AND x.sampled_at <= $until
            AND x.xid IN (SELECT unnest($xids::INTEGER[])){where}) AS xs
    WHERE {XID_EVENT}
)"""


_XID_ROWS: Final = f"""
    UNION ALL
    SELECT {_KEY}, {_NOTHING}, CASE WHEN sampled_at >= $since THEN sampled_at END, sampled_at
    FROM xall"""


def period_facts(db: Database, params: dict[str, Any], nodes: frozenset[str] | None,
                 fault_xids: tuple[int, ...]) -> list[Any]:
    """Per card with samples in the period: (node, index, uuid, monitorable, first, last,
    min unc, max unc, first fault event in the period, first evidence up to ``$until``); the
    fault event may belong to a card that is not monitorable (the caller drops it)."""
    query = period_params(db, params) | {"sealed": watermark(db)}
    if fault_xids:
        query["xids"] = list(fault_xids)
    sql = fill_statement(
        _FACTS, materialized=db.dialect.facts_days, days_part=period_days(node_filter(nodes)),
        raw_part=period_raw(node_filter(nodes)).strip(), cand=CAND,
        moved_raw=period_raw(node_filter(nodes), CAND).strip(), key=_KEY,
        any_known=_ANY_KNOWN, nothing=_NOTHING, days=DAYS, nodes=node_filter(nodes),
        first_increase=fill_statement(FIRST_INCREASE, key=_KEY, segs="msegs"),
        xid_cte=_xid_cte(node_filter(nodes, "x.node_id")) if fault_xids else "",
        xid_rows=_XID_ROWS if fault_xids else "")
    return db.fetchall(sql, query)
