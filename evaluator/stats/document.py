"""Prediction-effect statistics: two denominators, never mixed (reference "预测效果统计").

- precision (hit rate) = hits / matured, matured = hit + miss; pending and voided stay out;
- recall = faulty cards predicted before their FIRST fault in the period / all monitorable cards
  with a fault in the period. Faults come from scanning the samples (uncorrectable increase
  points, plus memory-XID events when the rule set passed in lists ``fault_xids``; without a
  rule set: ECC-only), not from the predictions, so the misses are in the denominator and
  listed. Each window says which definition was used (``fault_events``). Only the first fault
  counts: a card keeps its "uncorrectable > 0" strong signal after a fault, so later faults
  would be "predicted" for free and inflate recall. Precision stays the frozen per-prediction
  outcomes (each judged by its own version's definition at backfill);
- exposure = sum over monitorable cards of (last - first sample) in days; observed days = the
  fleet-wide span between the period's first and last sample;
- precision, recall and F1 are None (JSON null, never 0) below ``stats_min_matured`` matured
  predictions or ``stats_min_observed_days`` observed days; the note says how far off it is;
- ``precision_ci95`` and ``recall_ci95``: the 95% Wilson interval ``[low, high]`` of each ratio
  from the counts shown beside it (:mod:`gpu_health.evaluator.stats.intervals`); null with the
  ratio.

Both windows (7 and 30 days) are always reported side by side. Simulated data is counted only when
``source='simulated'`` is asked for explicitly. ``prediction_stats`` is the fixed interface the
read API calls; the backtest calls its two halves (``raw_stats``, then :func:`stats_document`)
with ``rule_version`` set, so each replayed version counts only its own predictions.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from gpu_health.clock import rfc3339
from gpu_health.contract import SOURCES
from gpu_health.errors import GpuHealthError
from gpu_health.evaluator.model import STATUSES
from gpu_health.evaluator.rules.faults import fault_events
from gpu_health.evaluator.stats.intervals import ci95
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.rollups import day_floor
from gpu_health.evaluator.store.statistics.stats_queries import Fault, RawStats, raw_stats

if TYPE_CHECKING:
    from gpu_health.evaluator.rules.ruleset import RuleSet

DEFAULT_RETENTION_DAYS: Final = 180
WINDOWS: Final = (7, 30)
DEFAULT_MIN_MATURED: Final = 20
DEFAULT_MIN_OBSERVED_DAYS: Final = 8
# ``first_fault``: made on a card with no fault observed at or before its t0 (an early warning);
# ``repeat``: made on a card that had already failed ("a failed card fails again").
CLASSES: Final = ("first_fault", "repeat")
_CLASS_TEXT: Final = {"first_fault": "first faults", "repeat": "repeat faults"}
DISCLAIMER: Final = (
    "Experimental: these GPU fault prediction rules have not been validated on real data. "
    "Their thresholds are initial empirical values taken from the public mechanism (a rising "
    "correctable-ECC rate precedes uncorrectable errors), not fitted to this fleet's fault "
    "history, and await calibration on real data. A null precision, recall or F1 means there is "
    "not enough data yet, not 0%."
)


def default_since(now: datetime, retention_days: int) -> datetime:
    """The default period's start: the first UTC midnight at or after ``now`` minus the
    retention. The statistics read whole sealed days from their rollups; a start inside a day
    made them aggregate that day's raw rows from it to midnight (16,384 cards: 0.15 s with a
    start at midnight, 0.35 s at 00:30). A ``since`` the caller gives is kept as is."""
    start = (now - timedelta(days=retention_days)).astimezone(UTC)
    floor = day_floor(start)
    return min(now, floor if floor == start else floor + timedelta(days=1))


def prediction_stats(
    db: Database,
    *,
    now: datetime,
    source: str = "real",
    since: datetime | None = None,
    nodes: frozenset[str] | None = None,
    ruleset: RuleSet | None = None,
    retention_days: int = DEFAULT_RETENTION_DAYS,
    rule_version: str | None = None,
) -> dict[str, Any]:
    """JSON-ready statistics for the period [since, now]; ``nodes=None`` means every node,
    otherwise only those node ids count anywhere (tenant visibility). ``rule_version``: count
    only that version's predictions (the backtest compares versions side by side in one file,
    the dashboard a shadow version beside the active one); None counts every version the
    worker ran as active (a shadow version's predictions never: ``rules.shadow``)."""
    if source not in SOURCES:
        raise GpuHealthError(f"unknown source {source!r} (one of {', '.join(SOURCES)})",
                             reason="bad_source")
    start = since if since is not None else default_since(now, retention_days)
    fault_xids = ruleset.params.fault_xids if ruleset else ()
    raw = raw_stats(db, since=start, until=now, source=source, nodes=nodes,
                    fault_xids=fault_xids, rule_version=rule_version)
    return stats_document(raw, source=source, since=start, until=now, ruleset=ruleset)


def stats_document(raw: RawStats, *, source: str, since: datetime, until: datetime,
                   ruleset: RuleSet | None) -> dict[str, Any]:
    """Pure: the :func:`prediction_stats` answer from the raw counts of ``[since, until]``
    (the backtest report reads the faults of the same ``raw``)."""
    min_matured = ruleset.params.stats_min_matured if ruleset else DEFAULT_MIN_MATURED
    min_days = ruleset.params.stats_min_observed_days if ruleset else DEFAULT_MIN_OBSERVED_DAYS
    return {
        "source": source,
        "since": rfc3339(since),
        "until": rfc3339(until),
        "generated_at": rfc3339(until),
        "disclaimer": DISCLAIMER,
        "windows": [window_stats(raw, w, min_matured, min_days) for w in WINDOWS],
    }


def ratio(numerator: int, denominator: int) -> float | None:
    return None if denominator == 0 else numerator / denominator


def f1(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    total = precision + recall
    return 0.0 if total == 0 else 2 * precision * recall / total


def observed_days(raw: RawStats) -> float | None:
    if raw.first_sample is None or raw.last_sample is None:
        return None
    return (raw.last_sample - raw.first_sample).total_seconds() / 86400


def _missed(fault: Fault) -> dict[str, Any]:
    return {"node_id": fault.node_id, "gpu_index": fault.gpu_index, "gpu_uuid": fault.gpu_uuid,
            "first_fault_at": rfc3339(fault.first_fault_at)}


def window_stats(raw: RawStats, window_days: int, min_matured: int,
                 min_days: int) -> dict[str, Any]:
    """Pure: the statistics of one window length from the raw counts."""
    counts = {s: raw.status_counts.get(window_days, {}).get(s, 0) for s in STATUSES}
    matured = counts["hit"] + counts["miss"]
    days = observed_days(raw)
    sufficient = matured >= min_matured and days is not None and days >= min_days
    predicted = [f for f in raw.faults if window_days in f.predicted_by]
    missed = [f for f in raw.faults if window_days not in f.predicted_by]
    precision = ratio(counts["hit"], matured) if sufficient else None
    recall = ratio(len(predicted), len(raw.faults)) if sufficient else None
    shown = "unknown (no samples)" if days is None else f"{days:.1f} days"
    note = f"observed {shown} (gate {min_days}), {matured} matured (gate {min_matured})"
    if not sufficient:
        note += ": not enough data, so precision, recall and F1 are null (not 0%)"
    elif not raw.faults:
        note += ": no fault event in the period, so recall is null"
    return {
        "window_days": window_days,
        "rule_versions": list(raw.rule_versions.get(window_days, ())),
        "fault_events": fault_events(raw.fault_xids),
        "predictions": counts,
        "matured": matured,
        "precision": precision,
        "precision_ci95": ci95(counts["hit"], matured, precision),
        "recall": recall,
        "recall_ci95": ci95(len(predicted), len(raw.faults), recall),
        "f1": f1(precision, recall),
        "monitorable_cards": raw.monitorable_cards,
        "faulty_cards": len(raw.faults),
        "predicted_faulty_cards": len(predicted),
        "missed_cards": len(missed),
        "missed": [_missed(f) for f in missed],
        "exposure_card_days": round(raw.exposure_seconds / 86400, 3),
        "observed_days": None if days is None else round(days, 3),
        "required_days": min_days,
        "required_matured": min_matured,
        "sufficient": sufficient,
        "note": note,
        "by_class": {cls: class_stats(raw, window_days, cls, min_matured, min_days)
                     for cls in CLASSES},
    }


def class_stats(raw: RawStats, window_days: int, cls: str, min_matured: int,
                min_days: int) -> dict[str, Any]:
    """Pure: one class's statistics, with the same gates as the totals applied to the class.

    Precision: the class's hits / its matured predictions. Recall: for ``first_fault``, the
    cards whose first observed fault (nothing before it) fell inside a prediction's window
    (such a prediction was necessarily made before any fault: a ``first_fault`` one) / all
    monitorable cards with a first fault in the period; for ``repeat``, the same over the
    faults of cards that had failed before."""
    counts = {s: raw.class_counts.get(window_days, {}).get(cls, {}).get(s, 0) for s in STATUSES}
    matured = counts["hit"] + counts["miss"]
    days = observed_days(raw)
    sufficient = matured >= min_matured and days is not None and days >= min_days
    faults = [f for f in raw.faults if f.first == (cls == "first_fault")]
    predicted = [f for f in faults if window_days in f.predicted_by]
    missed = [f for f in faults if window_days not in f.predicted_by]
    precision = ratio(counts["hit"], matured) if sufficient else None
    recall = ratio(len(predicted), len(faults)) if sufficient else None
    note = f"{matured} matured {cls} predictions (gate {min_matured})"
    if not sufficient:
        note += ": not enough data, so precision, recall and F1 are null (not 0%)"
    elif not faults:
        note += f": no {_CLASS_TEXT[cls][:-1]} in the period, so recall is null"
    return {
        "predictions": counts,
        "matured": matured,
        "precision": precision,
        "precision_ci95": ci95(counts["hit"], matured, precision),
        "recall": recall,
        "recall_ci95": ci95(len(predicted), len(faults), recall),
        "f1": f1(precision, recall),
        "faulty_cards": len(faults),
        "predicted_faulty_cards": len(predicted),
        "missed_cards": len(missed),
        "missed": [_missed(f) for f in missed],
        "sufficient": sufficient,
        "note": note,
    }
