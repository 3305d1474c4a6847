"""SQL for the prediction statistics: set-based queries, never one query per card.

The sample-derived half (cards, exposure, each monitorable card's first fault event in the
period, first evidence of a fault) is :mod:`gpu_health.evaluator.store.statistics.sample_facts`: it
does not depend on the predictions, so a caller measuring many versions over one period computes it
once. Here, per call:

1. prediction counts by window length and status (t0 in the period; of one rule version when
   ``rule_version`` is given, else of the active versions: never a shadow version's);
2. the fault events joined to the predictions (of that version, when given) whose window held
   them (``predicted_by``);
3. the first evidence of the cards a prediction was made for that the facts do not cover.

The reference design recalled per card in a loop and admitted it would not scale; here the
window-function passes touch only the few cards that actually had a fault and the small,
change-only XID table.

Classes (``first_fault`` / ``repeat``): a prediction is ``repeat`` when the card's first
evidence of a fault is at or before its t0 (or its own ``uncorrected_at_t0`` is above 0: the
strong "uncorrected > 0" signal is always a repeat), else ``first_fault``; a fault event is a
first fault when nothing came before it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from gpu_health.evaluator.model import FirstFault, PhysicalCard
from gpu_health.evaluator.rules.outcome import prediction_class
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.sql import fill_statement
from gpu_health.evaluator.store.statistics.sample_facts import (
    SampleFacts,
    base_params,
    first_evidence,
    node_filter,
    sample_facts,
)


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

    @property
    def event(self) -> FirstFault:
        """The fault event itself, in the one shape the store and the backtest key faults by."""
        return (self.node_id, self.gpu_index, self.gpu_uuid, self.first_fault_at)


@dataclass(frozen=True, slots=True)
class RawStats:
    """Counts the pure statistics are computed from (see
    :mod:`gpu_health.evaluator.stats.document`)."""

    status_counts: dict[int, dict[str, int]]  # window_days -> status -> count
    class_counts: dict[int, dict[str, dict[str, int]]]  # window_days -> class -> status -> n
    rule_versions: dict[int, tuple[str, ...]]  # window_days -> versions counted
    monitorable_cards: int
    exposure_seconds: float
    first_sample: datetime | None
    last_sample: datetime | None
    faults: tuple[Fault, ...]
    fault_xids: tuple[int, ...] = ()  # the fault definition used (empty: ECC-only)


def _version_filter(rule_version: str | None, table: str = "") -> str:
    """One version's predictions, or (None) the active versions': never a shadow's."""
    if rule_version is None:
        return f" AND {table}shadow IS NOT TRUE"
    return f" AND {table}rule_version = $rule_version"


def raw_stats(db: Database, *, since: datetime, until: datetime, source: str,
              nodes: frozenset[str] | None, fault_xids: Sequence[int] = (),
              rule_version: str | None = None, as_of: datetime | None = None,
              facts: SampleFacts | None = None) -> RawStats:
    """All numbers for one period [since, until] of one source (and node set). ``fault_xids``:
    the memory XIDs counted as fault events next to uncorrectable ECC (empty: ECC-only).
    ``rule_version``: count only that version's predictions (precision, and the windows that
    predict a fault for recall); None counts the active versions' (never a shadow's). Faults,
    cards and exposure come from the samples and do not depend on it: ``facts``, when given,
    is that part computed once for the same period (:func:`sample_facts`). ``as_of``: outcomes
    resolved after it count as pending (what was known then: a calibration's training part
    must not see an outcome decided by later data)."""
    xids = tuple(sorted(set(fault_xids)))
    if facts is None:
        facts = sample_facts(db, since=since, until=until, source=source, nodes=nodes,
                             fault_xids=xids)
    elif not facts.matches(since, until, source, nodes, xids):
        raise ValueError("raw_stats: the sample facts are of another period or definition")
    params = base_params(since, until, source, nodes)
    predictions = dict(params, rule_version=rule_version) if rule_version is not None else params
    status = "status"
    if as_of is not None:
        predictions = dict(predictions, as_of=as_of)
        status = ("CASE WHEN resolved_at IS NULL OR resolved_at > $as_of THEN 'pending' "
                  "ELSE status END")
    rows = db.fetchall(
        f"""SELECT window_days, {status}, rule_version, node_id, gpu_index, gpu_uuid, t0,
               uncorrected_at_t0
        FROM gpu_health_predictions
        WHERE source = $source AND t0 >= $since AND t0 <= $until{node_filter(nodes)}
              {_version_filter(rule_version)}""", predictions)
    faults = _predicted_by(db, facts.events, source, rule_version)
    missing = {(r[3], r[4], r[5]) for r in rows} - facts.evidence_of
    evidence = facts.evidence | first_evidence(db, params, missing, xids)
    counts, classes, versions = _count(rows, evidence)
    monitorable = facts.monitorable
    return RawStats(
        status_counts=counts,
        class_counts=classes,
        rule_versions=versions,
        monitorable_cards=len(monitorable),
        exposure_seconds=sum((c[5] - c[4]).total_seconds() for c in monitorable),
        first_sample=min((c[4] for c in facts.cards), default=None),
        last_sample=max((c[5] for c in facts.cards), default=None),
        faults=tuple(replace(f, first=_is_first(f, evidence)) for f in faults),
        fault_xids=xids,
    )


def _is_first(fault: Fault, evidence: dict[PhysicalCard, datetime]) -> bool:
    seen = evidence.get((fault.node_id, fault.gpu_index, fault.gpu_uuid))
    return seen is None or seen >= fault.first_fault_at


def _count(rows: Sequence[Any], evidence: dict[PhysicalCard, datetime]) -> tuple[
        dict[int, dict[str, int]], dict[int, dict[str, dict[str, int]]],
        dict[int, tuple[str, ...]]]:
    counts: dict[int, dict[str, int]] = {}
    classes: dict[int, dict[str, dict[str, int]]] = {}
    versions: dict[int, set[str]] = {}
    for window, status, version, node, gpu, uuid, t0, unc0 in rows:
        w, s = int(window), str(status)
        counts.setdefault(w, {})[s] = counts.get(w, {}).get(s, 0) + 1
        cls = prediction_class(t0, unc0, evidence.get((node, gpu, uuid)))
        per = classes.setdefault(w, {}).setdefault(cls, {})
        per[s] = per.get(s, 0) + 1
        versions.setdefault(w, set()).add(str(version))
    return counts, classes, {w: tuple(sorted(v)) for w, v in versions.items()}


_PREDICTED_BY = """
WITH f AS (
    SELECT unnest($n::VARCHAR[]) AS node_id, unnest($i::INTEGER[]) AS gpu_index,
           unnest($u::VARCHAR[]) AS gpu_uuid, unnest($at::TIMESTAMP[]) AS fault_at,
           unnest($ord::INTEGER[]) AS ord
)
SELECT f.ord, array_agg(DISTINCT p.window_days) FILTER (WHERE p.window_days IS NOT NULL)
FROM f
LEFT JOIN gpu_health_predictions p
  ON p.node_id = f.node_id AND p.gpu_index = f.gpu_index
 AND p.gpu_uuid IS NOT DISTINCT FROM f.gpu_uuid AND p.source = $source
 AND p.t0 < f.fault_at AND f.fault_at <= p.window_end{version}
GROUP BY f.ord
"""


def _predicted_by(db: Database, events: Sequence[FirstFault], source: str,
                  rule_version: str | None) -> tuple[Fault, ...]:
    """The fault events with the window lengths of the predictions (of ``rule_version``, or
    of the active versions) whose window held them; in the events' order."""
    if not events:
        return ()
    query: dict[str, Any] = {
        "n": [e[0] for e in events], "i": [e[1] for e in events], "u": [e[2] for e in events],
        "at": [e[3] for e in events], "ord": list(range(len(events))),
        "source": source}
    if rule_version is not None:
        query["rule_version"] = rule_version
    held = {int(o): w for o, w in db.fetchall(
        fill_statement(_PREDICTED_BY, version=_version_filter(rule_version, "p.")), query)}
    return tuple(Fault(n, i, u, at, frozenset(int(w) for w in (held.get(k) or [])))
                 for k, (n, i, u, at) in enumerate(events))
