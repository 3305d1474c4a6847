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
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpu_health.clock import Clock
from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.model import CardSlot, PhysicalCard
from gpu_health.evaluator.rules.actions import ActionPolicy, Recommendation, recommend
from gpu_health.evaluator.stats.document import prediction_stats
from gpu_health.evaluator.stats.snapshot_families import Snapshot, families
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.predictions.actions import card_states
from gpu_health.evaluator.store.predictions.prediction_state import open_predictions
from gpu_health.evaluator.store.statistics.api_queries import capabilities

if TYPE_CHECKING:
    from gpu_health.evaluator.rules.ruleset import RuleSet

DEFAULT_REFRESH_SECONDS: Final = 60.0
DEFAULT_STALL: Final = timedelta(minutes=60)
DB_SHARE: Final = 10.0  # refresh at most every 10 x the last snapshot's duration


def card_actions(db: Database, now: datetime, policy: ActionPolicy | None) -> tuple[
        tuple[PhysicalCard, Recommendation], ...]:
    """Every real card's recommended action (empty without a policy)."""
    if policy is None:
        return ()
    states = card_states(db, now=now, source=SOURCE_REAL,
                         xid_window=timedelta(hours=policy.xid_window_hours))
    return tuple((card, recommend(state, policy)) for card, state in sorted(
        states.items(), key=lambda item: (item[0][0], item[0][1])))


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
    pending = open_predictions(db)
    roles = ([(ruleset, "active")] if ruleset is not None and shadows else []) + \
        [(s, "shadow") for s in shadows]
    versions = tuple(
        (rs.version, role, prediction_stats(db, now=now, source=SOURCE_REAL, ruleset=rs,
                                            retention_days=retention_days,
                                            rule_version=rs.version))
        for rs, role in roles)
    return Snapshot(now, time.perf_counter() - started, stats, cards, stalled, pending,
                    versions=versions)


class PredictionStateCollector(Collector):
    """Renders the latest snapshot; nothing (unknown) before the first one."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterable[Metric]:
        snapshot = self.snapshot
        if snapshot is None:
            return
        yield from families(snapshot)
        taken = GaugeMetricFamily("gpu_health_evaluator_prediction_snapshot_timestamp_seconds",
                                  "When the prediction-state snapshot on this page was computed.")
        taken.add_metric([], snapshot.taken_at.timestamp())
        age = GaugeMetricFamily("gpu_health_evaluator_prediction_snapshot_age_seconds",
                                "Age of the prediction-state snapshot on this page.")
        age.add_metric([], max((self.clock() - snapshot.taken_at).total_seconds(), 0.0))
        spent = GaugeMetricFamily("gpu_health_evaluator_prediction_snapshot_duration_seconds",
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

    async def refresh(self, *, now: bool = False) -> Snapshot | None:
        """Compute a new snapshot, or None when the database budget says not yet; ``now``:
        whatever the budget says (the store changed wholesale, e.g. a history replay ended, and
        no figure from before may outlive it)."""
        last, started = self.collector.snapshot, self.monotonic()
        if not now and last is not None and self._started is not None and \
                started - self._started < DB_SHARE * last.duration_seconds:
            return None
        self._started = started
        snapshot = await self.db.run(self._compute, self.clock())
        self.collector.snapshot = snapshot
        return snapshot

    def card_actions(self) -> dict[CardSlot, Recommendation]:
        """The latest snapshot's recommended action per card slot (empty before the first)."""
        snapshot = self.collector.snapshot
        return {} if snapshot is None else {(node, gpu): rec
                                            for (node, gpu, _), rec in snapshot.actions}

    def _compute(self, now: datetime) -> Snapshot:
        snapshot = compute_snapshot(self.db, now, ruleset=self.ruleset,
                                    retention_days=self.retention_days, stall=self.stall,
                                    shadows=self.shadows)
        return replace(snapshot, actions=card_actions(self.db, now, self.policy))
