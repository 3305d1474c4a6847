"""One version's numbers on one part of the split: per class, with intervals and costs.

Everything comes from the code behind the live statistics (``raw_stats`` then
``stats_document``), with the same gates: precision and recall are null (never 0) below the
version's ``stats_min_matured`` matured predictions or ``stats_min_observed_days`` observed
days, and so is each 95% Wilson interval. The train part is read as of its end
(:class:`~evaluator.calibrate.split.Part`). Per class (``first_fault``, ``repeat``):
predictions by status, matured, precision and recall with their intervals, faulty and
predicted faulty cards, lead times (fault minus t0 of the prediction whose window held it) and,
with costs, GPU-hours saved (:func:`evaluator.backtest.compare.gpu_hours_saved`).
"""

from __future__ import annotations

from typing import Any, Final

from evaluator.backtest.compare import Costs, Point, gpu_hours_saved
from evaluator.backtest.report import days_summary, fault_key
from evaluator.calibrate.split import Part
from evaluator.rules.ruleset import RuleSet
from evaluator.stats.document import stats_document
from evaluator.store.backtest_queries import lead_times
from evaluator.store.db import Database
from evaluator.store.stats import raw_stats
from gpu_health.contract import SOURCE_REAL

FIELDS: Final = ("predictions", "matured", "precision", "precision_ci95", "recall",
                 "recall_ci95", "faulty_cards", "predicted_faulty_cards", "sufficient", "note")


def part_metrics(db: Database, ruleset: RuleSet, part: Part,
                 costs: Costs | None) -> dict[str, Any]:
    """The version's own predictions and the part's faults, per class (see module doc)."""
    window = ruleset.params.window_days
    raw = raw_stats(db, since=part.since, until=part.until, source=SOURCE_REAL, nodes=None,
                    fault_xids=ruleset.params.fault_xids, rule_version=ruleset.version,
                    as_of=part.as_of)
    doc = stats_document(raw, source=SOURCE_REAL, since=part.since, until=part.until,
                         ruleset=ruleset)
    own = next(w for w in doc["windows"] if w["window_days"] == window)
    result: dict[str, Any] = {"observed_days": own["observed_days"]}
    for cls, stats in own["by_class"].items():
        held = [fault_key(f) for f in raw.faults
                if window in f.predicted_by and f.first == (cls == "first_fault")]
        warned = lead_times(db, ruleset.version, held, warned=True) if costs else []
        result[cls] = {**{k: stats[k] for k in FIELDS},
                       "lead_time_days": days_summary(lead_times(db, ruleset.version, held)),
                       "gpu_hours_saved": gpu_hours_saved(costs, warned,
                                                          sum(stats["predictions"].values()))}
    result["gpu_hours_saved"] = None if costs is None else round(
        sum(result[c]["gpu_hours_saved"] for c in ("first_fault", "repeat")), 6)
    return result


def point(name: str, metrics: dict[str, Any]) -> Point:
    """First-fault precision and recall, and GPU-hours saved, for the Pareto comparison."""
    first = metrics["first_fault"]
    return Point(name, first["precision"], first["recall"], metrics["gpu_hours_saved"])
