"""One version's numbers on one part of the split: per class, with intervals and costs.

Everything comes from the code behind the live statistics (``raw_stats`` then
``stats_document``), with the same gates: precision and recall are null (never 0) below the
version's ``stats_min_matured`` matured predictions or ``stats_min_observed_days`` observed
days, and so is each 95% Wilson interval. The train part is read as of its end
(:class:`~gpu_health.evaluator.calibrate.split.Part`). Per class (``first_fault``, ``repeat``):
predictions by status, matured, precision and recall with their intervals, faulty and
predicted faulty cards, lead times (fault minus t0 of the prediction whose window held it), how
many credited faults a window opened before the part holds (``credited_from_other_part``: the
test part's recall credits them while its precision counts only its own predictions) and,
with costs, GPU-hours saved (:func:`gpu_health.evaluator.backtest.compare.gpu_hours_saved`).
"""

from __future__ import annotations

from typing import Any, Final

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.backtest.compare import Costs, Point
from gpu_health.evaluator.backtest.report import caught, class_savings, days_summary
from gpu_health.evaluator.calibrate.split import Part
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.stats.document import stats_document
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest_queries import credited_from_before, lead_times
from gpu_health.evaluator.store.statistics.sample_facts import SampleFacts, sample_facts
from gpu_health.evaluator.store.statistics.stats_queries import raw_stats

FIELDS: Final = ("predictions", "matured", "precision", "precision_ci95", "recall",
                 "recall_ci95", "faulty_cards", "predicted_faulty_cards", "sufficient", "note")


class PartFacts:
    """The sample-derived statistics of each part and fault definition, read once for every
    version measured on it
    (:func:`gpu_health.evaluator.store.statistics.sample_facts.sample_facts`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._facts: dict[tuple[str, tuple[int, ...]], SampleFacts] = {}

    def of(self, part: Part, fault_xids: tuple[int, ...]) -> SampleFacts:
        key = (part.name, fault_xids)
        if key not in self._facts:
            cards = [(str(n), int(i), None if u is None else str(u)) for n, i, u in
                     self.db.fetchall("SELECT DISTINCT node_id, gpu_index, gpu_uuid FROM "
                                      "gpu_health_predictions")]
            self._facts[key] = sample_facts(self.db, since=part.since, until=part.until,
                                            source=SOURCE_REAL, nodes=None,
                                            fault_xids=fault_xids, evidence_of=cards)
        return self._facts[key]


def part_metrics(db: Database, ruleset: RuleSet, part: Part, costs: Costs | None,
                 facts: PartFacts | None = None) -> dict[str, Any]:
    """The version's own predictions and the part's faults, per class (see module doc)."""
    window = ruleset.params.window_days
    xids = tuple(sorted(set(ruleset.params.fault_xids)))
    raw = raw_stats(db, since=part.since, until=part.until, source=SOURCE_REAL, nodes=None,
                    fault_xids=xids, rule_version=ruleset.version, as_of=part.as_of,
                    facts=None if facts is None else facts.of(part, xids))
    doc = stats_document(raw, source=SOURCE_REAL, since=part.since, until=part.until,
                         ruleset=ruleset)
    own = next(w for w in doc["windows"] if w["window_days"] == window)
    result: dict[str, Any] = {"observed_days": own["observed_days"], "fault_xids": list(xids)}
    saved = class_savings(db, ruleset.version, window, raw.faults,
                          {cls: c["predictions"] for cls, c in own["by_class"].items()}, costs)
    for cls, stats in own["by_class"].items():
        held = [f.event for f in raw.faults
                if window in f.predicted_by and f.first == (cls == "first_fault")]
        result[cls] = {**{k: stats[k] for k in FIELDS},
                       "lead_time_days": days_summary(lead_times(db, ruleset.version, held)),
                       # recall credits them, precision counts only this part's predictions
                       "credited_from_other_part": credited_from_before(
                           db, ruleset.version, held, part.since),
                       "caught": caught(raw.faults, window, cls == "first_fault"),
                       "gpu_hours_saved": saved[cls]}
    result["gpu_hours_saved"] = None if costs is None else round(
        sum(result[c]["gpu_hours_saved"] for c in ("first_fault", "repeat")), 6)
    return result


def point(name: str, metrics: dict[str, Any]) -> Point:
    """First-fault precision and recall, and GPU-hours saved, for the Pareto comparison."""
    first = metrics["first_fault"]
    return Point(name, first["precision"], first["recall"], metrics["gpu_hours_saved"],
                 hits=first["predictions"]["hit"], matured=first["matured"],
                 faulty=first["faulty_cards"], caught=frozenset(first["caught"]),
                 definition=tuple(metrics["fault_xids"]))
