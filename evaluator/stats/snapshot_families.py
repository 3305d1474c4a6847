"""A prediction-state snapshot and how it reads on /metrics: one gauge family per number.

Every ratio the statistics report as null (not enough data) is ABSENT here, never 0, and so are
its interval bounds; docs/dashboards.md lists the names. :func:`families` yields them in a fixed
order for :class:`gpu_health.evaluator.stats.state_collector.PredictionStateCollector`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.core import GaugeMetricFamily, Metric

from gpu_health.contract import COUNTER_KEYS
from gpu_health.evaluator.model import CardSlot, PhysicalCard

if TYPE_CHECKING:
    from gpu_health.evaluator.rules.actions import Recommendation
    from gpu_health.evaluator.store.predictions.prediction_state import OpenPrediction
    from gpu_health.evaluator.store.statistics.api_queries import CardCapability

DAY_SECONDS: Final = 86400.0
P: Final = "gpu_health_"
CARD_LABELS: Final = ["node", "gpu", "uuid"]
OPEN_LABELS: Final = ["node", "gpu", "uuid", "rule_version", "signal", "layer", "window_days"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    taken_at: datetime
    duration_seconds: float
    stats: dict[str, Any]  # gpu_health.evaluator.stats.document.prediction_stats(source="real")
    cards: tuple[CardCapability, ...]
    stalled: frozenset[CardSlot]  # (node, gpu) with no sample for longer than the stall
    open_predictions: tuple[OpenPrediction, ...]
    actions: tuple[tuple[PhysicalCard, Recommendation], ...] = ()
    # With shadow versions: (version, "active" | "shadow", that version's statistics alone)
    versions: tuple[tuple[str, str, dict[str, Any]], ...] = ()


def families(snapshot: Snapshot) -> Iterator[Metric]:
    """Every family of the snapshot, in the order the collector has always rendered them."""
    yield from _open_families(snapshot)
    yield from _window_families(snapshot)
    yield from _version_families(snapshot)
    yield from _fleet_families(snapshot)
    yield from _card_families(snapshot)
    yield from _action_family(snapshot)


def _action_family(snapshot: Snapshot) -> Iterator[Metric]:
    family = _gauge(P + "card_action", "1 for the action the recommended-action policy names "
                    "for the card (docs/actions.md): replace_candidate, reboot_node, "
                    "reset_gpu, restart_workload, none, or unknown when the policy cannot judge "
                    "the card. "
                    "A recommendation, not a diagnosis.", [*CARD_LABELS, "action", "policy"])
    for (node, gpu, uuid), rec in snapshot.actions:
        family.add_metric([*_card(node, gpu, uuid), rec.action, rec.policy], 1)
    yield family


def _gauge(name: str, documentation: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=labels)


def _card(node: str, gpu: int, uuid: str | None) -> list[str]:
    return [node, str(gpu), uuid or ""]


def _open_families(snapshot: Snapshot) -> Iterator[Metric]:
    one = _gauge(P + "prediction_open", "1 per pending real prediction (open window), by card, "
                 "rule version, signal, layer and window length.", OPEN_LABELS)
    t0 = _gauge(P + "prediction_open_t0_timestamp_seconds", "Sample time (t0) an open "
                "prediction is based on.", OPEN_LABELS)
    end = _gauge(P + "prediction_open_window_end_timestamp_seconds", "End of an open "
                 "prediction's hit window (t0 + window_days).", OPEN_LABELS)
    seen: set[tuple[str, ...]] = set()
    for p in snapshot.open_predictions:
        labels = [*_card(p.node_id, p.gpu_index, p.gpu_uuid), p.rule_version, p.signal, p.layer,
                  str(p.window_days)]
        if tuple(labels) in seen:  # a duplicate series would make Prometheus reject the scrape
            continue
        seen.add(tuple(labels))
        one.add_metric(labels, 1)
        t0.add_metric(labels, p.t0.timestamp())
        end.add_metric(labels, p.window_end.timestamp())
    yield from (one, t0, end)


def _window_families(snapshot: Snapshot) -> Iterator[Metric]:
    windows = snapshot.stats["windows"]
    outcomes = _gauge(P + "prediction_outcomes", "Real predictions with t0 in the statistics "
                      "period, by window length and status.", ["window_days", "status"])
    simple = {
        "matured": "Matured predictions (hit + miss) in the period.",
        "faulty_cards": "Monitorable cards with a real fault event in the period.",
        "predicted_faulty_cards": "Faulty cards predicted before their first fault.",
        "missed_cards": "Faulty cards NOT predicted before their first fault.",
    }
    ratios = {
        "precision": "hits / matured. ABSENT (never 0) while the samples are insufficient.",
        "recall": "Predicted faulty cards / faulty cards. ABSENT while insufficient.",
        "f1": "Harmonic mean of precision and recall. ABSENT while either is.",
    }
    families = {k: _gauge(P + "prediction_" + k, text, ["window_days"])
                for k, text in {**simple, **ratios}.items()}
    sufficient = _gauge(P + "prediction_stats_sufficient", "1 when enough predictions matured "
                        "and enough days were observed for ratios, else 0.", ["window_days"])
    bounds = _bound_families(P + "prediction_", ["window_days"])
    for w in windows:
        label = str(w["window_days"])
        for status, count in w["predictions"].items():
            outcomes.add_metric([label, status], count)
        for key in simple:
            families[key].add_metric([label], w[key])
        for key in ratios:
            if w[key] is not None:
                families[key].add_metric([label], w[key])
        _add_bounds(bounds, [label], w)
        sufficient.add_metric([label], 1 if w["sufficient"] else 0)
    yield from (outcomes, *families.values(), *bounds.values(), sufficient)
    yield from _class_families(windows)


def _bound_families(prefix: str, labels: list[str]) -> dict[tuple[str, int], GaugeMetricFamily]:
    """Lower and upper 95% Wilson bounds of precision and recall, each its own series."""
    return {(key, i): _gauge(f"{prefix}{key}_ci95_{end}", f"{end.title()} bound of the 95% "
                             f"Wilson interval of the {key} beside it. ABSENT when the {key} "
                             "is.", labels)
            for key in ("precision", "recall") for i, end in enumerate(("lower", "upper"))}


def _add_bounds(families: dict[tuple[str, int], GaugeMetricFamily], labels: list[str],
                stats: dict[str, Any]) -> None:
    for (key, i), family in families.items():
        interval = stats[f"{key}_ci95"]
        if interval is not None:
            family.add_metric(labels, interval[i])


def _class_families(windows: list[dict[str, Any]]) -> Iterator[Metric]:
    """The same numbers per class: ``first_fault`` (early warnings) and ``repeat``."""
    labels = ["window_days", "class"]
    outcomes = _gauge(P + "prediction_class_outcomes", "Real predictions with t0 in the "
                      "statistics period, by window, class and status.", [*labels, "status"])
    keys = {"matured": "Matured predictions of the class.",
            "faulty_cards": "Cards with a fault of the class (first or repeat) in the period.",
            "predicted_faulty_cards": "Those predicted before the fault.",
            "precision": "The class's hits / matured. ABSENT (never 0) while insufficient.",
            "recall": "Predicted faulty cards / faulty cards of the class. ABSENT while "
                      "insufficient.",
            "f1": "Harmonic mean of the class's precision and recall. ABSENT while either is."}
    families = {k: _gauge(P + "prediction_class_" + k, text, labels) for k, text in keys.items()}
    sufficient = _gauge(P + "prediction_class_stats_sufficient", "1 when enough predictions of "
                        "the class matured and enough days were observed, else 0.", labels)
    bounds = _bound_families(P + "prediction_class_", labels)
    for w in windows:
        for cls, stats in w["by_class"].items():
            label = [str(w["window_days"]), cls]
            for status, count in stats["predictions"].items():
                outcomes.add_metric([*label, status], count)
            for key, family in families.items():
                if stats[key] is not None:
                    family.add_metric(label, stats[key])
            _add_bounds(bounds, label, stats)
            sufficient.add_metric(label, 1 if stats["sufficient"] else 0)
    yield from (outcomes, *families.values(), *bounds.values(), sufficient)


def _version_families(snapshot: Snapshot) -> Iterator[Metric]:
    """Each version's own statistics (active and shadow side by side), all predictions
    (``class="all"``) and per class; present only when shadow versions are configured."""
    labels = ["rule_version", "role", "window_days", "class"]
    outcomes = _gauge(P + "prediction_version_outcomes", "Real predictions of ONE rule version "
                      "(active or shadow) with t0 in the statistics period, by status.",
                      [*labels, "status"])
    matured = _gauge(P + "prediction_version_matured", "Matured predictions of one version.",
                     labels)
    ratios = {k: _gauge(P + f"prediction_version_{k}", f"One version's {k}. ABSENT (never 0) "
                        "while insufficient.", labels) for k in ("precision", "recall")}
    bounds = _bound_families(P + "prediction_version_", labels)
    for version, role, stats in snapshot.versions:
        for w in stats["windows"]:
            for cls, part in (("all", w), *w["by_class"].items()):
                label = [version, role, str(w["window_days"]), cls]
                for status, count in part["predictions"].items():
                    outcomes.add_metric([*label, status], count)
                matured.add_metric(label, part["matured"])
                for key, family in ratios.items():
                    if part[key] is not None:
                        family.add_metric(label, part[key])
                _add_bounds(bounds, label, part)
    yield from (outcomes, matured, *ratios.values(), *bounds.values())


def _fleet_families(snapshot: Snapshot) -> Iterator[Metric]:
    first = snapshot.stats["windows"][0]
    cards = _gauge(P + "monitorable_cards", "Real cards with at least one known health counter "
                   "in the statistics period.")
    cards.add_metric([], first["monitorable_cards"])
    # Base units (seconds), as promtool requires: dashboards divide by 86400 for card-days.
    exposure = _gauge(P + "exposure_card_seconds", "Sum over monitorable cards of (last - first "
                      "sample), in the statistics period (card-days x 86400).")
    exposure.add_metric([], first["exposure_card_days"] * DAY_SECONDS)
    observed = _gauge(P + "observed_span_seconds", "Fleet-wide span between the statistics "
                      "period's first and last sample (absent when there is no sample).")
    if first["observed_days"] is not None:
        observed.add_metric([], first["observed_days"] * DAY_SECONDS)
    yield from (cards, exposure, observed)


def _card_families(snapshot: Snapshot) -> Iterator[Metric]:
    capability = _gauge(P + "card_capability", "1 if the card's samples ever held a value for "
                        "the metric (collectable), 0 if never (unknown).", [*CARD_LABELS, "metric"])
    stalled = _gauge(P + "card_collection_stalled", "1 if the card has had no sample (keepalive "
                     "rows included) for more than 60 minutes, else 0.", CARD_LABELS)
    last = _gauge(P + "card_last_sample_timestamp_seconds", "Time of the card's newest stored "
                  "sample.", CARD_LABELS)
    for c in snapshot.cards:
        labels = _card(c.node_id, c.gpu_index, c.gpu_uuid)
        for key in COUNTER_KEYS:
            capability.add_metric([*labels, key], 1 if c.collectable[key] else 0)
        stalled.add_metric(labels, 1 if (c.node_id, c.gpu_index) in snapshot.stalled else 0)
        last.add_metric(labels, c.last_sample_at.timestamp())
    yield from (capability, stalled, last)


