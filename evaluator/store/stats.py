"""SQL for the prediction statistics: three set-based queries, never one query per card.

1. prediction counts by window length and status (t0 in the period; of one rule version when
   ``rule_version`` is given, else of every version);
2. one aggregate over the period's samples per card (node, index, UUID): monitorable or not,
   first/last sample (exposure, observed span), min/max uncorrectable count;
3. the fault-event scan: ``lag()`` over the known uncorrectable counts, run ONLY for the cards
   whose count moved in the period (max > min from query 2: a card whose count never changed has
   no increase point), plus, when the definition lists ``fault_xids``, the memory-XID events
   (``xid_samples.XID_EVENT``) of those codes in the period; the card's first event of either
   kind is joined to the predictions (of that rule version, when given) whose window held it.

ECC events need both rows in the period (the first sample of a card in the period has no
predecessor there). An XID event's predecessor may lie before the period: XID rows are written
on change only, so the previous count is usually older than the period start. XID events of
cards that are not monitorable (no known counter in the period) are dropped, as ECC ones are.

The reference design recalled per card in a loop and admitted it would not scale; here the
window-function passes touch only the few cards that actually had a fault and the small,
change-only XID table.

Classes (``first_fault`` / ``repeat``): a card's first evidence of a fault is its earliest row,
up to the period's end, with a known uncorrectable count above 0, or its earliest memory-XID
event of the definition. A prediction is ``repeat`` when that evidence is at or before its t0
(or its own ``uncorrected_at_t0`` is above 0: the strong "uncorrected > 0" signal is always a
repeat), else ``first_fault``; a fault event is a first fault when nothing came before it. One
more statement, over the cards that have a prediction or a fault in the period only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from evaluator.store.db import Database
from evaluator.store.rollup_sql import CAND, FIRST_INCREASE, PERIOD_SEGMENTS
from evaluator.store.rollups import DAY, EPOCH, covered, day_floor
from evaluator.store.xid_samples import TABLE as XID_TABLE
from evaluator.store.xid_samples import XID_EVENT, XID_PREV
from gpu_health.clock import from_naive_utc, to_naive_utc
from gpu_health.contract import COUNTER_KEYS


@dataclass(frozen=True, slots=True)
class Fault:
    """A monitorable card's first fault event in the period (uncorrectable-ECC increase point,
    or memory-XID event of the definition's ``fault_xids``)."""

    node_id: str
    gpu_index: int
    gpu_uuid: str | None
    first_fault_at: datetime
    predicted_by: frozenset[int]  # window_days of predictions whose window held the fault
    first: bool = True  # no fault evidence on the card before it (a first fault, not a repeat)


@dataclass(frozen=True, slots=True)
class RawStats:
    """Counts the pure statistics are computed from (see :mod:`evaluator.stats.document`)."""

    status_counts: dict[int, dict[str, int]]  # window_days -> status -> count
    class_counts: dict[int, dict[str, dict[str, int]]]  # window_days -> class -> status -> n
    rule_versions: dict[int, tuple[str, ...]]  # window_days -> versions counted
    monitorable_cards: int
    exposure_seconds: float
    first_sample: datetime | None
    last_sample: datetime | None
    faults: tuple[Fault, ...]
    fault_xids: tuple[int, ...] = ()  # the fault definition used (empty: ECC-only)


def _node_filter(nodes: frozenset[str] | None, column: str = "node_id") -> str:
    return "" if nodes is None else f" AND {column} IN (SELECT unnest($nodes::VARCHAR[]))"


def _version_filter(rule_version: str | None, column: str = "rule_version") -> str:
    return "" if rule_version is None else f" AND {column} = $rule_version"


def _base_params(since: datetime, until: datetime, source: str,
                 nodes: frozenset[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"since": to_naive_utc(since), "until": to_naive_utc(until),
                              "source": source}
    if nodes is not None:
        params["nodes"] = sorted(nodes)
    return params


def raw_stats(db: Database, *, since: datetime, until: datetime, source: str,
              nodes: frozenset[str] | None, fault_xids: Sequence[int] = (),
              rule_version: str | None = None) -> RawStats:
    """All numbers for one period [since, until] of one source (and node set). ``fault_xids``:
    the memory XIDs counted as fault events next to uncorrectable ECC (empty: ECC-only).
    ``rule_version``: count only that version's predictions (precision, and the windows that
    predict a fault for recall); None counts every version. Faults, cards and exposure come
    from the samples and do not depend on it."""
    params = _base_params(since, until, source, nodes)
    xids = tuple(sorted(set(fault_xids)))
    predictions = dict(params, rule_version=rule_version) if rule_version is not None else params
    rows = db.fetchall(
        f"""SELECT window_days, status, rule_version, node_id, gpu_index, gpu_uuid, t0,
               uncorrected_at_t0
        FROM gpu_health_predictions
        WHERE source = $source AND t0 >= $since AND t0 <= $until{_node_filter(nodes)}
              {_version_filter(rule_version)}""", predictions)
    cards = _cards(db, params, nodes)
    monitorable = [c for c in cards if c[3]]
    moved = [c for c in monitorable if c[6] is not None and c[7] is not None and c[7] > c[6]]
    faults = _faults(db, params, moved, xids, {(c[0], c[1], c[2]) for c in monitorable}, nodes,
                     rule_version)
    evidence = first_evidence(db, params, {(r[3], r[4], r[5]) for r in rows}
                              | {(f.node_id, f.gpu_index, f.gpu_uuid) for f in faults}, xids)
    counts, classes, versions = _count(rows, evidence)
    return RawStats(
        status_counts=counts,
        class_counts=classes,
        rule_versions=versions,
        monitorable_cards=len(monitorable),
        exposure_seconds=sum((c[5] - c[4]).total_seconds() for c in monitorable),
        first_sample=min((from_naive_utc(c[4]) for c in cards), default=None),
        last_sample=max((from_naive_utc(c[5]) for c in cards), default=None),
        faults=tuple(replace(f, first=_is_first(f, evidence)) for f in faults),
        fault_xids=xids,
    )


Card = tuple[str, int, "str | None"]



def prediction_class(t0: datetime, unc0: int | None, evidence: datetime | None) -> str:
    """``repeat`` when the card showed a fault at or before t0, else ``first_fault``."""
    repeat = (unc0 is not None and unc0 > 0) or (evidence is not None and evidence <= t0)
    return "repeat" if repeat else "first_fault"


def _is_first(fault: Fault, evidence: dict[Card, datetime]) -> bool:
    seen = evidence.get((fault.node_id, fault.gpu_index, fault.gpu_uuid))
    return seen is None or seen >= fault.first_fault_at


def _count(rows: Sequence[Any], evidence: dict[Card, datetime]) -> tuple[
        dict[int, dict[str, int]], dict[int, dict[str, dict[str, int]]],
        dict[int, tuple[str, ...]]]:
    counts: dict[int, dict[str, int]] = {}
    classes: dict[int, dict[str, dict[str, int]]] = {}
    versions: dict[int, set[str]] = {}
    for window, status, version, node, gpu, uuid, t0, unc0 in rows:
        w, s = int(window), str(status)
        counts.setdefault(w, {})[s] = counts.get(w, {}).get(s, 0) + 1
        cls = prediction_class(from_naive_utc(t0), unc0, evidence.get((node, gpu, uuid)))
        per = classes.setdefault(w, {}).setdefault(cls, {})
        per[s] = per.get(s, 0) + 1
        versions.setdefault(w, set()).add(str(version))
    return counts, classes, {w: tuple(sorted(v)) for w, v in versions.items()}


_EVIDENCE = f"""
WITH cand AS (
    SELECT unnest($c_nodes::VARCHAR[]) AS node_id, unnest($c_idx::INTEGER[]) AS gpu_index,
           unnest($c_uuid::VARCHAR[]) AS gpu_uuid
),
ev AS (
    SELECT node_id, gpu_index, gpu_uuid, min(pos_at) AS seen_at
    FROM ({PERIOD_SEGMENTS.format(nodes="", cards=CAND)}) AS s
    WHERE pos_at IS NOT NULL
    GROUP BY node_id, gpu_index, gpu_uuid{{xids}}
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
    sql = _EVIDENCE.format(xids=_EVIDENCE_XIDS if fault_xids else "")
    query = _period(db, query)
    return {(str(n), int(i), None if u is None else str(u)): from_naive_utc(at)
            for n, i, u, at in db.fetchall(sql, query)}


def _period(db: Database, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` plus the sealed days [$dlo, $dhi) inside the period (empty: dlo = dhi)."""
    since, until = from_naive_utc(params["since"]), from_naive_utc(params["until"])
    dlo = day_floor(since) + (DAY if day_floor(since) < since else timedelta(0))
    dhi = max(dlo, covered(db, until))
    return params | {"dlo": to_naive_utc(dlo), "dhi": to_naive_utc(dhi)}


def _cards(db: Database, params: dict[str, Any], nodes: frozenset[str] | None) -> list[Any]:
    """(node, index, uuid, monitorable, first, last, min unc, max unc) per card in the period,
    from the sealed days' rollups and the raw rows of the rest."""
    any_known = " + ".join(f"n_{c}" for c in COUNTER_KEYS)
    segments = PERIOD_SEGMENTS.format(nodes=_node_filter(nodes), cards="")
    return db.fetchall(
        f"""SELECT node_id, gpu_index, gpu_uuid, bool_or({any_known} > 0), min(first_at),
               max(last_at), min(unc_min), max(unc_max)
        FROM ({segments}) AS s
        GROUP BY node_id, gpu_index, gpu_uuid""", _period(db, params),
    )


_ECC_EVENTS = f"""
cand AS (
    SELECT unnest($c_nodes::VARCHAR[]) AS node_id, unnest($c_idx::INTEGER[]) AS gpu_index,
           unnest($c_uuid::VARCHAR[]) AS gpu_uuid
),
segs AS ({PERIOD_SEGMENTS.format(nodes="", cards=CAND)}),
ecc AS (
    SELECT node_id, gpu_index, gpu_uuid, event_at AS fault_at
    FROM ({FIRST_INCREASE.format(key="node_id, gpu_index, gpu_uuid", segs="segs")}) AS f
)"""

_XID_EVENTS = f"""
xev AS (
    SELECT node_id, gpu_index, gpu_uuid, min(sampled_at) AS fault_at
    FROM (SELECT x.node_id, x.gpu_index, x.gpu_uuid, x.sampled_at, x.count,
                 {XID_PREV} AS prev
          FROM {XID_TABLE} x
          WHERE x.source = $source AND x.sampled_at <= $until
            AND x.xid IN (SELECT unnest($xids::INTEGER[])){{nodes}}) AS xs
    WHERE {XID_EVENT} AND sampled_at >= $since
    GROUP BY node_id, gpu_index, gpu_uuid
)"""

_FAULTS = """
WITH {events},
first_fault AS (
    SELECT node_id, gpu_index, gpu_uuid, min(fault_at) AS fault_at
    FROM ({union}) AS u GROUP BY node_id, gpu_index, gpu_uuid
)
SELECT f.node_id, f.gpu_index, f.gpu_uuid, f.fault_at,
       array_agg(DISTINCT p.window_days) FILTER (WHERE p.window_days IS NOT NULL)
FROM first_fault f
LEFT JOIN gpu_health_predictions p
  ON p.node_id = f.node_id AND p.gpu_index = f.gpu_index
 AND p.gpu_uuid IS NOT DISTINCT FROM f.gpu_uuid AND p.source = $source
 AND p.t0 < f.fault_at AND f.fault_at <= p.window_end{version}
GROUP BY f.node_id, f.gpu_index, f.gpu_uuid, f.fault_at
ORDER BY f.fault_at, f.node_id, f.gpu_index
"""


def _faults(db: Database, params: dict[str, Any], moved: Sequence[Any],
            fault_xids: tuple[int, ...], monitorable: set[tuple[Any, Any, Any]],
            nodes: frozenset[str] | None, rule_version: str | None) -> tuple[Fault, ...]:
    """First fault event per monitorable card; one statement, only the parts that can find
    something (no moved card: no ECC scan; ECC-only definition: no XID scan)."""
    events: list[str] = []
    query: dict[str, Any] = {k: params[k] for k in ("source", "since", "until")}
    if moved:
        query = _period(db, query)
        events.append(_ECC_EVENTS)
        query |= {"c_nodes": [c[0] for c in moved], "c_idx": [c[1] for c in moved],
                  "c_uuid": [c[2] for c in moved]}
    if fault_xids:
        events.append(_XID_EVENTS.format(nodes=_node_filter(nodes, "x.node_id")))
        query["xids"] = list(fault_xids)
        if nodes is not None:
            query["nodes"] = params["nodes"]
    if not events:
        return ()
    if rule_version is not None:
        query["rule_version"] = rule_version
    union = " UNION ALL ".join(
        f"SELECT * FROM {name}" for name in (("ecc",) if moved else ()) + (
            ("xev",) if fault_xids else ()))
    rows = db.fetchall(_FAULTS.format(events=",".join(events), union=union,
                                      version=_version_filter(rule_version, "p.rule_version")),
                       query)
    return tuple(
        Fault(str(n), int(i), None if u is None else str(u), from_naive_utc(at),
              frozenset(int(w) for w in (windows or [])))
        for n, i, u, at, windows in rows
        if (n, i, u) in monitorable
    )
