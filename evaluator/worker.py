"""The prediction worker: every scan interval, backfill first, then predict.

Order matters (reference "命中窗口与回填"): a card whose previous window ends this tick is
resolved first, so "no new prediction while a window is open" never locks it out for a round.
Each source ('real', 'simulated') is evaluated separately; rows of the two never meet in one
series. With the rule set disabled the worker still backfills (open windows must still be
proven or disproven) but makes no new predictions, and says so once in the log.

Shadow versions (``rules.shadow``) are evaluated at every tick after the active one, each with
its own parameters, and stored as shadow predictions: backfilled like any other (the backfill
does not look at versions), never alerted, never in the default statistics. That is how a
calibrated version proves itself on live data before an operator makes it active.

Overlapping instances are safe: prediction ids are deterministic and outcomes are
compare-and-set (:mod:`gpu_health.evaluator.store.predictions.records`); with several evaluators
only the leader runs the worker.

``tick`` is synchronous (it runs on a database thread). There is no loop here: the composition
root hands ``tick`` to the process host (``gpu_health.evaluator.app``), whose one catch-all per loop
tick logs and counts every failure into ``gpu_health_evaluator_loop_errors_total{loop="worker",
reason}`` and keeps going.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge

from gpu_health.clock import Clock, system_clock
from gpu_health.contract import SOURCES
from gpu_health.evaluator.rules.outcome import classify
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.rules.signals import decide
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.predictions.backfill import observe_pending
from gpu_health.evaluator.store.predictions.features import (
    feature_rows,
    row_could_fire,
    row_to_features,
)
from gpu_health.evaluator.store.predictions.records import (
    NewPrediction,
    insert_predictions,
    resolve,
)
from gpu_health.evaluator.store.predictions.rule_versions import register_ruleset
from gpu_health.evaluator.store.readings.hourly import with_hourly
from gpu_health.evaluator.store.readings.rollups import seal

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TickReport:
    """What one tick did. ``resolved`` counts only the outcomes THIS instance wrote."""

    now: datetime
    rule_version: str
    predicting: bool
    resolved: dict[str, int] = field(default_factory=dict)  # hit / miss / voided
    evaluated: dict[str, int] = field(default_factory=dict)  # cards evaluated per source
    decisions: dict[str, int] = field(default_factory=dict)  # cards a signal fired for
    predictions: tuple[NewPrediction, ...] = ()  # rows inserted by this tick
    shadow_predictions: tuple[NewPrediction, ...] = ()  # the shadow versions' (never alerted)


class WorkerMetrics:
    """The worker's self-metrics, on a registry the caller owns."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.ticks = Counter("gpu_health_evaluator_worker_ticks",
                             "Completed prediction-worker ticks.", registry=registry)
        self.last_success = Gauge(
            "gpu_health_evaluator_worker_last_success_timestamp_seconds",
            "Unix time of the worker's last successful tick.", registry=registry)
        self.duration = Gauge("gpu_health_evaluator_worker_tick_duration_seconds",
                              "Duration of the last worker tick.", registry=registry)
        self.evaluated = Gauge("gpu_health_evaluator_worker_cards_evaluated",
                               "Cards evaluated by the last tick.", ["source"], registry=registry)
        self.created = Counter("gpu_health_evaluator_predictions_created",
                               "Predictions inserted by this instance.", ["source", "layer"],
                               registry=registry)
        self.resolved = Counter("gpu_health_evaluator_predictions_resolved",
                                "Prediction outcomes written by this instance.", ["status"],
                                registry=registry)


class Worker:
    """Backfill + predict over one store with one rule set."""

    def __init__(self, db: Database, ruleset: RuleSet, clock: Clock = system_clock, *,
                 registry: CollectorRegistry | None = None,
                 metrics: WorkerMetrics | None = None,
                 sources: Sequence[str] = SOURCES, shadows: Sequence[RuleSet] = ()) -> None:
        self.db = db
        self.ruleset = ruleset
        self.shadows = tuple(shadows)
        self.clock = clock
        self.sources = tuple(sources)
        self.metrics = metrics or WorkerMetrics(registry or CollectorRegistry())
        self._registered = False
        self._said_disabled = False

    def register(self, now: datetime | None = None) -> None:
        """Record the rule versions in the store; RuleError if one changed (fail fast)."""
        for ruleset in (self.ruleset, *self.shadows):
            register_ruleset(self.db, ruleset, now or self.clock())
        self._registered = True

    def tick(self, now: datetime | None = None) -> TickReport:
        """One backfill + predict pass at ``now`` (default: the clock). Blocking."""
        now = now or self.clock()
        started = time.perf_counter()
        if not self._registered:
            self.register(now)
        seal(self.db, now)  # summarise the days now complete (no statement when none is due)
        outcomes = [o for obs in observe_pending(self.db, now) if (o := classify(obs))]
        resolved = resolve(self.db, outcomes, now)
        for status, count in resolved.items():  # written even if predicting fails below
            self.metrics.resolved.labels(status=status).inc(count)
        report = self._predict(now, resolved)
        report = replace(report, shadow_predictions=tuple(
            p for rs in self.shadows if rs.params.enabled
            for p in self._insert(rs, now, {}, {}, shadow=True)))
        for p in report.predictions:
            self.metrics.created.labels(source=p.source, layer=p.layer).inc()
        for source, count in report.evaluated.items():
            self.metrics.evaluated.labels(source=source).set(count)
        self.metrics.ticks.inc()
        self.metrics.last_success.set(now.timestamp())
        self.metrics.duration.set(time.perf_counter() - started)
        log.info("worker tick at %s (%s): resolved %s, evaluated %s, %d new prediction(s)%s",
                 now.isoformat(), self.ruleset.version, resolved, report.evaluated,
                 len(report.predictions), f", {len(report.shadow_predictions)} by shadow "
                 f"version(s)" if self.shadows else "")
        return report

    def _predict(self, now: datetime, resolved: dict[str, int]) -> TickReport:
        params = self.ruleset.params
        if not params.enabled:
            if not self._said_disabled:
                log.warning("rule set %s is disabled (enabled: false): backfilling only, no new "
                            "predictions", self.ruleset.version)
                self._said_disabled = True
            return TickReport(now, self.ruleset.version, False, resolved)
        self._said_disabled = False
        evaluated: dict[str, int] = {}
        fired: dict[str, int] = {}
        created = self._insert(self.ruleset, now, evaluated, fired, shadow=False)
        return TickReport(now, self.ruleset.version, True, resolved, evaluated, fired,
                          tuple(created))

    def _insert(self, ruleset: RuleSet, now: datetime, evaluated: dict[str, int],
                fired: dict[str, int], *, shadow: bool) -> list[NewPrediction]:
        """Features, decisions and inserts of one version for every source."""
        params = ruleset.params
        created: list[NewPrediction] = []
        for source in self.sources:
            rows = feature_rows(self.db, [now], source, params)
            # could_fire, read off the rows: an exact, cheap necessary condition of a decision
            # that most cards fail; deciding (0.15 s) and building the features (0.22 s) of
            # every card was a fifth of a 32,768-card tick
            candidates = with_hourly(self.db, [row_to_features(row, source, params)
                                               for row in rows if row_could_fire(row, params)],
                                     params)
            decisions = [d for f in candidates if (d := decide(f, params)) is not None]
            evaluated[source], fired[source] = len(rows), len(decisions)
            created += insert_predictions(self.db, decisions, rule_version=ruleset.version,
                                          window_days=params.window_days, now=now,
                                          shadow=shadow)
        return created
