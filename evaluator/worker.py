"""The prediction worker: every scan interval, backfill first, then predict.

Order matters (reference "命中窗口与回填"): a card whose previous window ends this tick is
resolved first, so "no new prediction while a window is open" never locks it out for a round.
Each source ('real', 'simulated') is evaluated separately; rows of the two never meet in one
series. With the rule set disabled the worker still backfills (open windows must still be
proven or disproven) but makes no new predictions, and says so once in the log.

Single instance for now; leader election comes later. Overlapping instances are still safe:
prediction ids are deterministic and outcomes are compare-and-set
(:mod:`evaluator.store.predictions`).

``tick`` is synchronous (it runs on a database thread). There is no loop here: the composition
root hands ``tick`` to the process host (``evaluator.app``), whose one catch-all per loop tick
logs and counts every failure into ``gpu_health_evaluator_loop_errors_total{loop="worker",
reason}`` and keeps going.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge

from evaluator.rules.outcome import classify
from evaluator.rules.ruleset import RuleSet
from evaluator.rules.signals import decide
from evaluator.store.backfill import observe_pending
from evaluator.store.db import Database
from evaluator.store.features import card_features
from evaluator.store.predictions import NewPrediction, insert_predictions, resolve
from evaluator.store.rollups import seal
from evaluator.store.rule_versions import register_ruleset
from gpu_health.clock import Clock, system_clock
from gpu_health.contract import SOURCES

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
                 sources: Sequence[str] = SOURCES) -> None:
        self.db = db
        self.ruleset = ruleset
        self.clock = clock
        self.sources = tuple(sources)
        self.metrics = metrics or WorkerMetrics(registry or CollectorRegistry())
        self._registered = False
        self._said_disabled = False

    def register(self, now: datetime | None = None) -> None:
        """Record the rule version in the store; RuleError if it changed (fail fast)."""
        register_ruleset(self.db, self.ruleset, now or self.clock())
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
        for p in report.predictions:
            self.metrics.created.labels(source=p.source, layer=p.layer).inc()
        for source, count in report.evaluated.items():
            self.metrics.evaluated.labels(source=source).set(count)
        self.metrics.ticks.inc()
        self.metrics.last_success.set(now.timestamp())
        self.metrics.duration.set(time.perf_counter() - started)
        log.info("worker tick at %s (%s): resolved %s, evaluated %s, %d new prediction(s)",
                 now.isoformat(), self.ruleset.version, resolved, report.evaluated,
                 len(report.predictions))
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
        created: list[NewPrediction] = []
        for source in self.sources:
            features = card_features(self.db, [now], source, params)
            decisions = [d for f in features if (d := decide(f, params)) is not None]
            evaluated[source], fired[source] = len(features), len(decisions)
            created += insert_predictions(self.db, decisions, rule_version=self.ruleset.version,
                                          window_days=params.window_days, now=now)
        return TickReport(now, self.ruleset.version, True, resolved, evaluated, fired,
                          tuple(created))
