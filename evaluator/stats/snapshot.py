"""Prediction state on the evaluator's /metrics, for the Grafana dashboards (real data only).

A loop computes a :class:`Snapshot` on a database thread (the 7/30-day statistics, the capability
matrix, the open predictions) every refresh interval; :class:`PredictionStateCollector` renders
the latest snapshot when /metrics is scraped. A scrape therefore never queries DuckDB, and a slow
statistics query delays the next snapshot, not the scrape. Until the first snapshot every series
here is absent (unknown), and so is every ratio the statistics report as null: precision,
recall and F1 are never exported as 0 for "not enough data". docs/dashboards.md lists the names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from evaluator.rules.actions import ActionPolicy, Recommendation, recommend
from evaluator.stats.document import prediction_stats
from evaluator.store.actions import card_states
from evaluator.store.api_queries import CardCapability, capabilities
from evaluator.store.db import Database
from evaluator.store.prediction_state import OpenPrediction, open_predictions
from gpu_health.clock import Clock
from gpu_health.contract import COUNTER_KEYS, SOURCE_REAL

if TYPE_CHECKING:
    from evaluator.rules.ruleset import RuleSet

DEFAULT_REFRESH_SECONDS: Final = 60.0
DEFAULT_STALL: Final = timedelta(minutes=60)
DAY_SECONDS: Final = 86400.0
DB_SHARE: Final = 10.0  # refresh at most every 10 x the last snapshot's duration
P: Final = "gpu_health_"
CARD_LABELS: Final = ["node", "gpu", "uuid"]
OPEN_LABELS: Final = ["node", "gpu", "uuid", "rule_version", "signal", "layer", "window_days"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    taken_at: datetime
    duration_seconds: float
    stats: dict[str, Any]  # evaluator.stats.prediction_stats(source="real")
    cards: tuple[CardCapability, ...]
    stalled: frozenset[tuple[str, int]]  # (node, gpu) with no sample for longer than the stall
    open_predictions: tuple[OpenPrediction, ...]
    actions: tuple[tuple[tuple[str, int, str | None], Recommendation], ...] = ()
    # With shadow versions: (version, "active" | "shadow", that version's statistics alone)
    versions: tuple[tuple[str, str, dict[str, Any]], ...] = ()


def card_actions(db: Database, now: datetime, policy: ActionPolicy | None) -> tuple[
        tuple[tuple[str, int, str | None], Recommendation], ...]:
    """Every real card's recommended action (empty without a policy)."""
    if policy is None:
        return ()
    states = card_states(db, now=now, source=SOURCE_REAL,
                         xid_window=timedelta(hours=policy.xid_window_hours))
    return tuple((card, recommend(state, policy)) for card, state in sorted(
        states.items(), key=lambda item: (item[0][0], item[0][1])))


def _action_family(snapshot: Snapshot) -> Iterator[Metric]:
    family = _gauge(P + "card_action", "1 for the action the recommended-action policy names "
                    "for the card (docs/actions.md): replace_candidate, reset_gpu, "
                    "restart_workload, none, or unknown when the policy cannot judge the card. "
                    "A recommendation, not a diagnosis.", [*CARD_LABELS, "action", "policy"])
    for (node, gpu, uuid), rec in snapshot.actions:
        family.add_metric([*_card(node, gpu, uuid), rec.action, rec.policy], 1)
    yield family


def compute_snapshot(db: Database, now: datetime, *, ruleset: RuleSet | None = None,
                     retention_days: int = 180, stall: timedelta = DEFAULT_STALL,
                     shadows: tuple[RuleSet, ...] = ()) -> Snapshot:
    """Everything the collector renders, for ``source='real'`` (blocking: a database thread).
    With shadow versions, also each version's own statistics (the active one's and every
    shadow's), for the dashboard's side-by-side table; without, nothing more is computed."""
    started = time.perf_counter()
    stats = prediction_stats(db, now=now, source=SOURCE_REAL, ruleset=ruleset,
                             retention_days=retention_days)
    cards = capabilities(db, source=SOURCE_REAL, now=now)
    stalled = frozenset((c.node_id, c.gpu_index) for c in cards if now - c.last_sample_at > stall)
    pending = open_predictions(db, now=now)
    roles = ([(ruleset, "active")] if ruleset is not None and shadows else []) + \
        [(s, "shadow") for s in shadows]
    versions = tuple(
        (rs.version, role, prediction_stats(db, now=now, source=SOURCE_REAL, ruleset=rs,
                                            retention_days=retention_days,
                                            rule_version=rs.version))
        for rs, role in roles)
    return Snapshot(now, time.perf_counter() - started, stats, cards, stalled, pending,
                    versions=versions)


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


class PredictionStateCollector(Collector):
    """Renders the latest snapshot; nothing (unknown) before the first one."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterable[Metric]:
        snapshot = self.snapshot
        if snapshot is None:
            return
        yield from _open_families(snapshot)
        yield from _window_families(snapshot)
        yield from _version_families(snapshot)
        yield from _fleet_families(snapshot)
        yield from _card_families(snapshot)
        yield from _action_family(snapshot)
        taken = _gauge("gpu_health_evaluator_prediction_snapshot_timestamp_seconds",
                       "When the prediction-state snapshot on this page was computed.")
        taken.add_metric([], snapshot.taken_at.timestamp())
        age = _gauge("gpu_health_evaluator_prediction_snapshot_age_seconds",
                     "Age of the prediction-state snapshot on this page.")
        age.add_metric([], max((self.clock() - snapshot.taken_at).total_seconds(), 0.0))
        spent = _gauge("gpu_health_evaluator_prediction_snapshot_duration_seconds",
                       "How long computing the snapshot took (database time).")
        spent.add_metric([], snapshot.duration_seconds)
        yield from (taken, age, spent)


class PredictionState:
    """The refresh loop's tick plus the collector, registered on the app's registry.

    A refresh is skipped until ``DB_SHARE`` x the last snapshot's duration has passed since it
    started, so the snapshot never takes more than a tenth of a database thread however large
    the store grows (43.6 M rows: 0.3 s, refreshed every 60 s; see bench/dashboard_snapshot).
    """

    def __init__(self, db: Database, clock: Clock, *, ruleset: RuleSet | None,
                 retention_days: int, registry: Any, stall: timedelta = DEFAULT_STALL,
                 monotonic: Callable[[], float] = time.monotonic,
                 policy: ActionPolicy | None = None, shadows: tuple[RuleSet, ...] = ()) -> None:
        self.db = db
        self.policy = policy
        self.shadows = shadows
        self.clock = clock
        self.ruleset = ruleset
        self.retention_days = retention_days
        self.stall = stall
        self.collector = PredictionStateCollector(clock)
        self.monotonic = monotonic
        self._started: float | None = None  # monotonic start of the last refresh
        registry.register(self.collector)

    async def refresh(self) -> Snapshot | None:
        """Compute a new snapshot, or None when the database budget says not yet."""
        last, started = self.collector.snapshot, self.monotonic()
        if last is not None and self._started is not None and \
                started - self._started < DB_SHARE * last.duration_seconds:
            return None
        self._started = started
        snapshot = await self.db.run(self._compute, self.clock())
        self.collector.snapshot = snapshot
        return snapshot

    def card_actions(self) -> dict[tuple[str, int], Recommendation]:
        """The latest snapshot's recommended action per card slot (empty before the first)."""
        snapshot = self.collector.snapshot
        return {} if snapshot is None else {(node, gpu): rec
                                            for (node, gpu, _), rec in snapshot.actions}

    def _compute(self, now: datetime) -> Snapshot:
        snapshot = compute_snapshot(self.db, now, ruleset=self.ruleset,
                                    retention_days=self.retention_days, stall=self.stall,
                                    shadows=self.shadows)
        return replace(snapshot, actions=card_actions(self.db, now, self.policy))
