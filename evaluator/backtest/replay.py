"""Replay a rule set over a backtest file: the live worker's ticks, in time order.

Ticks fall every ``scan_interval_minutes`` (aligned to the Unix epoch) across the period. At
each tick, exactly as :meth:`gpu_health.evaluator.worker.Worker.tick`: backfill first (observe every
pending prediction, classify, compare-and-set the outcomes, ``resolved_at`` = the tick), then
predict (features of every card at the tick, the signal engine, one insert with the one-open-window
rule, ``predicted_at`` = the tick). The building blocks are the live ones: ``register_ruleset``,
``observe_pending``, ``classify``, ``resolve``, ``card_features``, ``decide``,
``insert_predictions``.

Three things differ, none in the result:

- features are extracted for many ticks per statement (``card_features(at=[...])``, built for
  this) instead of one statement per tick;
- ticks that provably change nothing are skipped (:mod:`gpu_health.evaluator.backtest.activity`);
- features are extracted only for the cards that can fire a known signal at some tick
  (``card_features(cards=...)``): the others' decisions would all be None. In a fleet most
  cards never err, and every feature statement would pay for them.

Versions are replayed one after the other over the same samples. That equals running each alone:
a version only inserts its own predictions, and when a later version replays, the earlier ones'
leftovers are windows still open at the end of the period with no fault in them, which no
backfill before the end can resolve.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.backtest.activity import (
    KNOWN_SIGNALS,
    BackfillPlan,
    Ranges,
    TickPlan,
    bucket_ranges,
    bucket_windows,
    tick_grid,
)
from gpu_health.evaluator.model import RESOLVED
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.outcome import classify
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.rules.signals import SIGNALS, decide
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest import table_rows
from gpu_health.evaluator.store.history.backtest_queries import (
    active_ranges,
    existing_predictions,
    uncorrected_increase_points,
)
from gpu_health.evaluator.store.predictions.backfill import observe_pending
from gpu_health.evaluator.store.predictions.features import card_features
from gpu_health.evaluator.store.predictions.records import insert_predictions, resolve
from gpu_health.evaluator.store.predictions.rule_versions import register_ruleset
from gpu_health.evaluator.store.readings.hourly import with_hourly

log = logging.getLogger(__name__)

DEFAULT_CHUNK = 96  # evaluation times per feature statement
HORIZON = timedelta(days=7)  # ... spread over at most this much time


@dataclass(slots=True)
class ReplaySummary:
    """What one version's replay did (for the report and the benchmark)."""

    version: str
    ticks: int = 0
    evaluated_ticks: int = 0
    backfill_ticks: int = 0
    predictions: int = 0
    resolved: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESOLVED, 0))
    skipping: bool = True
    seconds: float = 0.0
    cards: int | None = None  # features of this many cards that can fire (None: every card)


Runs = list[tuple[str, int, str, int, int]]


def candidate_ranges(db: Database, params: RuleParams, ticks: list[datetime],
                     cache: dict[tuple[object, ...], Runs] | None = None) -> Ranges | None:
    """Per card and kind, the ticks at which a decision is possible
    (:mod:`gpu_health.evaluator.backtest.activity`): empty for a disabled rule set (it predicts
    nothing), None when the engine has a signal that reasoning does not know (every tick and card).
    ``cache`` keeps the store's answer for versions with the same bucket spans."""
    if not params.enabled:
        return {}
    if not {s.name for s in SIGNALS} <= KNOWN_SIGNALS:
        return None
    w = bucket_windows(params)
    key = (w.bucket, w.strong, w.trend, w.base, w.min_increase)
    runs = None if cache is None else cache.get(key)
    if runs is None:
        runs = active_ranges(db, bucket=w.bucket, strong=w.strong, trend=w.trend, base=w.base,
                             min_increase=w.min_increase)
        if cache is not None:
            cache[key] = runs
    return bucket_ranges(ticks, runs, w.bucket)


def _plans(db: Database, ruleset: RuleSet, ticks: list[datetime],
           skip: bool) -> tuple[TickPlan, BackfillPlan]:
    params = ruleset.params
    signals_known = {s.name for s in SIGNALS} <= KNOWN_SIGNALS
    if skip and not signals_known:
        log.warning("unknown signals in the engine: evaluating every tick of %s",
                    ruleset.version)
    if not params.enabled:
        log.warning("rule set %s is disabled (enabled: false): backfilling only",
                    ruleset.version)
    ranges = candidate_ranges(db, params, ticks) if skip or not params.enabled else None
    xid_faults = bool(params.fault_xids) and table_rows(db, "gpu_health_xid_samples") > 0
    if skip and xid_faults:
        log.warning("XID fault events in the file: backfilling %s at every tick", ruleset.version)
    ends, pending = existing_predictions(db, ruleset.version)
    points = None
    if skip and not xid_faults:
        # Every window's t0 sample is at most max_age before its tick (or it is a pending
        # prediction of an earlier replay): from there on the increase points are those of
        # the backfill's series.
        since = min([ticks[0] - params.boundary_max_age, *(p[4] for p in pending)])
        points = uncorrected_increase_points(db, since, ticks[-1])
    candidates, backfills = TickPlan(len(ticks), ranges), BackfillPlan(ticks, points)
    for node, gpu, end in ends:
        candidates.block((node, gpu), -1, bisect_left(ticks, end))
    for pid, node, gpu, uuid, t0, end in pending:
        backfills.watch(pid, (node, gpu, uuid), t0, end)
    return candidates, backfills


def replay(db: Database, ruleset: RuleSet, start: datetime, end: datetime, *,
           skip: bool = True, chunk: int = DEFAULT_CHUNK,
           progress: Callable[[int, int], None] | None = None,
           shadow: bool = False) -> ReplaySummary:
    """Replay ``ruleset`` over ``[start, end]``; ``progress(done, total)`` after each tick.
    The whole replay is one transaction: thousands of small commits would cost more than the
    work, and a replay that fails half-way leaves nothing of this version behind. ``shadow``:
    store the predictions as a shadow version's (the live first-start history)."""
    began = time.perf_counter()
    ticks = tick_grid(start, end, ruleset.params.scan_interval)
    summary = ReplaySummary(ruleset.version, ticks=len(ticks), skipping=skip)
    if ticks:
        with db.transaction():
            register_ruleset(db, ruleset, ticks[0])
            candidates, backfills = _plans(db, ruleset, ticks, skip)
            summary.cards = None if candidates.cards is None else len(candidates.cards)
            _Walk(db, ruleset, ticks, candidates, backfills, summary, chunk, progress,
                  shadow=shadow).run()
    summary.seconds = time.perf_counter() - began
    log.info("replayed %s: %d ticks, %d evaluated, %d backfills, %d predictions, resolved %s "
             "in %.1f s", ruleset.version, summary.ticks, summary.evaluated_ticks,
             summary.backfill_ticks, summary.predictions, summary.resolved, summary.seconds)
    return summary


@dataclass(slots=True)
class _Walk:
    """The tick loop: at each tick that can change anything, backfill, then predict."""

    db: Database
    ruleset: RuleSet
    ticks: list[datetime]
    candidates: TickPlan
    backfills: BackfillPlan
    summary: ReplaySummary
    chunk: int
    progress: Callable[[int, int], None] | None
    shadow: bool = False
    features: dict[datetime, list[CardFeatures]] = field(default_factory=dict)

    def run(self) -> None:
        i, n = 0, len(self.ticks)
        while i < n:
            nexts = [k for k in (self.candidates.next_candidate(i), self.backfills.next_tick(i))
                     if k is not None]
            if not nexts:
                break
            j = min(nexts)
            if self.backfills.next_tick(j) == j:
                self._backfill(j)
            if self.candidates.cover[j] > 0:
                self._predict(j)
            if self.progress is not None:
                self.progress(j + 1, n)
            i = j + 1
        if self.progress is not None:
            self.progress(n, n)

    def _backfill(self, j: int) -> None:
        now = self.ticks[j]
        self.summary.backfill_ticks += 1
        outcomes = [o for obs in observe_pending(self.db, now) if (o := classify(obs))]
        for status, count in resolve(self.db, outcomes, now).items():
            self.summary.resolved[status] += count
        self.backfills.done(j, (o.prediction_id for o in outcomes))

    def _predict(self, j: int) -> None:
        """Decide and insert as the worker does. Decisions of cards with an open window are not
        offered: the insert's one-open-window rule would refuse them (it still checks the
        rest)."""
        now = self.ticks[j]
        if now not in self.features:
            self._extract(j)
        params = self.ruleset.params
        decisions = [d for f in self.features.pop(now)
                     if not self.candidates.blocked((f.node_id, f.gpu_index), j)
                     and (d := decide(f, params)) is not None]
        if not decisions:
            return
        created = insert_predictions(self.db, decisions, rule_version=self.ruleset.version,
                                     window_days=params.window_days, now=now,
                                     shadow=self.shadow)
        for p in created:
            self.summary.predictions += 1
            self.backfills.watch(p.id, (p.node_id, p.gpu_index, p.gpu_uuid), p.t0,
                                 p.window_end)
            self.candidates.block((p.node_id, p.gpu_index), j,
                                  bisect_left(self.ticks, p.window_end))

    def _extract(self, j: int) -> None:
        """Features of the ticks :meth:`TickPlan.pick` chooses from ``j`` on, within
        ``HORIZON`` (one statement reads a narrow time range)."""
        end = bisect_left(self.ticks, self.ticks[j] + HORIZON)
        chosen = [self.ticks[k] for k in self.candidates.pick(j, end, self.chunk)]
        self.features = {t: [] for t in chosen}
        params = self.ruleset.params
        for f in with_hourly(self.db, card_features(self.db, chosen, SOURCE_REAL, params,
                                                    chunk=len(chosen),
                                                    cards=self.candidates.cards), params):
            self.features[f.at].append(f)
        self.summary.evaluated_ticks += len(chosen)
