"""Replay many rule versions over one history, sharing what does not depend on their thresholds.

A calibration replays dozens of versions that differ only in thresholds. :func:`replay` does each
alone: its own feature statements, one insert per tick that made a prediction and one backfill
per tick that can decide one (about 2 minutes for 192 cards x 150 days). Here:

- **features are shared** by the versions of one *feature group* (same growth window, baseline
  span, boundary age and scan interval: the boundary values only depend on those), read once
  per tick (:mod:`gpu_health.evaluator.backtest.feature_cache`) and cut to each version's ``k``; a
  cheap necessary condition (:func:`gpu_health.evaluator.rules.signals.could_fire`) spares most rows
  the full :func:`decide`;
- **predictions are made in memory**: each version walks its own :class:`TickPlan` (from its
  own ``min_increase``), decides with the live :func:`decide`, and applies the insert's
  one-open-window rule itself (a card whose window ends after the new t0 gets nothing), then
  writes all its predictions in one statement;
- **one backfill** at the last tick observes every distinct window once (versions that differ
  in thresholds mostly share their strong predictions: same card, same t0, same window), and
  each prediction's outcome is written with the tick at which its version's tick-by-tick replay
  decides it: the first tick at or after the fault event in the window (hit), or at or after
  the window's end (miss, voided). Outcomes are frozen once seen and a pending prediction's
  window is read up to ``now`` only, so the status, the explanation and the resolution time are
  those of :func:`replay`.

``tests/evaluator/backtest/test_batch_replay.py`` checks the rows (ids, t0, predicted_at,
status, resolved_at, outcome) against :func:`replay` of every version alone over a grid. As
:func:`replay`, it goes on from a version's predictions already in the file (an earlier run):
none is changed, none of their windows is opened again, a longer period adds the rest.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from gpu_health.evaluator.backtest.activity import KNOWN_SIGNALS, TickPlan, tick_at_or_after
from gpu_health.evaluator.backtest.activity import tick_grid as grid
from gpu_health.evaluator.backtest.feature_cache import FeatureCache
from gpu_health.evaluator.backtest.replay import (
    DEFAULT_CHUNK,
    ReplaySummary,
    Runs,
    candidate_ranges,
)
from gpu_health.evaluator.model import RESOLVED, CardSlot
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.outcome import Outcome, WindowObservation, classify
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.rules.signals import SIGNALS, could_fire_with, decide
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest_queries import window_ends
from gpu_health.evaluator.store.predictions.backfill import observe_pending
from gpu_health.evaluator.store.predictions.records import (
    NewPrediction,
    insert_rows,
    pending_of,
    prediction_id,
    resolve_each,
)
from gpu_health.evaluator.store.predictions.rule_versions import register_ruleset

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


def group_key(params: RuleParams) -> tuple[int, int, int, float]:
    """What the features depend on besides ``consecutive_windows``."""
    return (params.growth_window_hours, params.baseline_days, params.boundary_max_age_minutes,
            params.scan_interval_minutes)


def _walk(ruleset: RuleSet, ticks: list[datetime], plan: TickPlan, cache: FeatureCache,
          ends: Sequence[tuple[str, int, datetime]] = ()) -> tuple[list[NewPrediction], int]:
    """The predictions :func:`replay` would insert, and how many ticks were evaluated.
    ``ends``: per card, the end of its last window already in the file."""
    params, k = ruleset.params, ruleset.params.consecutive_windows
    cut = k < cache.params.consecutive_windows
    # The quick test (:func:`gpu_health.evaluator.rules.signals.could_fire`, split by :func:`entry`)
    # is a necessary condition of the signals it knows; with others in the table every card is
    # decided in full.
    quick = {s.name for s in SIGNALS} <= KNOWN_SIGNALS
    window = timedelta(days=params.window_days)
    open_until: dict[CardSlot, datetime] = {}
    for node, gpu, until in ends:  # as replay: no window opened again before they end
        open_until[(node, gpu)] = until
        plan.block((node, gpu), -1, bisect_left(ticks, until))
    made: list[NewPrediction] = []
    evaluated, i = 0, 0
    while (j := plan.next_candidate(i)) is not None:
        evaluated += 1
        for e in cache.entries(j):
            if quick and not could_fire_with(e.always, e.increase, params):
                continue
            # The insert's rule: no new window while one of the card's ends after its t0.
            if plan.blocked(e.card, j) or open_until.get(e.card, e.t0) > e.t0:
                continue
            f = e.features(cache.params)
            if cut:
                f = replace(f, corrected=f.corrected[:k + 1], hourly=None if f.hourly is None
                            else f.hourly[:k * params.growth_window_hours + 1])
            d = decide(f, params)
            if d is None:
                continue
            made.append(_row(d.features, d.signal, d.layer, d.evidence, ruleset, ticks[j]))
            open_until[e.card] = e.t0 + window
            plan.block(e.card, j, bisect_left(ticks, e.t0 + window))
        i = j + 1
    return made, evaluated


def _row(f: CardFeatures, signal: str, layer: str, evidence: str, ruleset: RuleSet,
         now: datetime) -> NewPrediction:
    w = ruleset.params.window_days
    return NewPrediction(
        prediction_id(f.node_id, f.gpu_index, f.gpu_uuid, f.source, ruleset.version, w, f.t0),
        f.node_id, f.gpu_index, f.gpu_uuid, f.source, ruleset.version, w, f.t0,
        f.t0 + timedelta(days=w), now, signal, layer, evidence, f.uncorrected)


def decided_at(obs: WindowObservation, outcome: Outcome, window_end: datetime) -> datetime:
    """When the samples decided the outcome: the fault event of a hit, else the window's end."""
    if outcome.status != "hit":
        return window_end
    return min(t for t in (obs.fault_at, obs.xid_fault_at) if t is not None)


Window = tuple[str, int, str | None, str, datetime, datetime, int | None, tuple[int, ...]]


def _window(p: NewPrediction, fault_xids: tuple[int, ...]) -> Window:
    """What a window's observation depends on (the version only through its fault XIDs)."""
    return (p.node_id, p.gpu_index, p.gpu_uuid, p.source, p.t0, p.window_end,
            p.uncorrected_at_t0, fault_xids)


def backfill(db: Database, made: dict[str, list[NewPrediction]],
             rulesets: dict[str, RuleSet], now: datetime) -> dict[str, dict[str, int]]:
    """Decide every version's predictions from one observation at ``now`` (the last tick)
    per distinct window: versions that differ only in thresholds often predict the same card
    at the same t0 (the strong signals are theirs alike), and those windows show the same
    samples. Each outcome is written at the tick its own version's replay decides it."""
    by_window: dict[Window, list[NewPrediction]] = {}
    for version, rows in made.items():
        xids = rulesets[version].params.fault_xids
        for p in rows:
            by_window.setdefault(_window(p, xids), []).append(p)
    chosen = {same[0].id: same for same in by_window.values()}
    decided: list[tuple[Outcome, datetime]] = []
    for obs in observe_pending(db, now, ids=list(chosen)):
        outcome = classify(obs)
        if outcome is None:
            continue
        for p in chosen[obs.prediction_id]:
            at = decided_at(obs, outcome, p.window_end)
            decided.append((replace(outcome, prediction_id=p.id),
                            tick_at_or_after(at, rulesets[p.rule_version].params.scan_interval)))
    resolve_each(db, decided)
    counts: dict[str, dict[str, int]] = {v: dict.fromkeys(RESOLVED, 0) for v in made}
    versions = {p.id: p.rule_version for rows in made.values() for p in rows}
    for outcome, _ in decided:
        counts[versions[outcome.prediction_id]][outcome.status] += 1
    return counts


def replay_versions(db: Database, rulesets: Sequence[RuleSet], start: datetime,
                    end: datetime, *, chunk: int = DEFAULT_CHUNK,
                    progress: Progress | None = None) -> list[ReplaySummary]:
    """Replay every version over ``[start, end]``: the rows :func:`replay` of each alone
    writes. ``progress(done, total)`` after each version."""
    ranges: dict[tuple[object, ...], Runs] = {}
    plans: dict[str, TickPlan] = {}
    for rs in rulesets:  # a rule file changed under a used version fails here, before work
        ticks = grid(start, end, rs.params.scan_interval)
        if ticks:
            register_ruleset(db, rs, ticks[0])
            plans[rs.version] = TickPlan(len(ticks), candidate_ranges(db, rs.params, ticks,
                                                                      ranges))
    caches = _caches(db, rulesets, plans, start, end, chunk)
    summaries, made = [], {}
    with db.transaction():
        for n, rs in enumerate(rulesets, 1):
            summary, rows = _one(db, rs, start, end, plans.get(rs.version),
                                 caches.get(group_key(rs.params)))
            summaries.append(summary)
            if rows is not None:
                made[rs.version] = rows
            if progress is not None:
                progress(n, len(rulesets))
        last = max((grid(start, end, rs.params.scan_interval)[-1] for rs in rulesets
                    if rs.version in made), default=None)
        resolved = {} if last is None else backfill(
            db, made, {rs.version: rs for rs in rulesets}, last)
    for summary in summaries:
        summary.resolved = resolved.get(summary.version, summary.resolved)
    return summaries


def _caches(db: Database, rulesets: Sequence[RuleSet], plans: dict[str, TickPlan],
            start: datetime, end: datetime, chunk: int) -> dict[tuple[object, ...], FeatureCache]:
    """One cache per feature group: the widest ``k``, the union of the cards and of the
    candidate ticks of its versions (before any window blocks them)."""
    groups: dict[tuple[object, ...], list[RuleSet]] = {}
    for rs in rulesets:
        if rs.version in plans:
            groups.setdefault(group_key(rs.params), []).append(rs)
    caches = {}
    for key, members in groups.items():
        widest = max(members, key=lambda r: r.params.consecutive_windows).params
        weak = [r.params.weak_gate for r in members if r.params.reads_weak]
        if weak and not widest.reads_weak:  # the weak layer's values for those that read it
            widest = replace(widest, weak_gate=weak[0])
        cards = [plans[r.version].cards for r in members]
        union = None if any(c is None for c in cards) else sorted(
            {card for c in cards for card in c or ()})
        candidates = sorted({j for r in members
                             for j, n in enumerate(plans[r.version].cover) if n > 0})
        trimming = [r.params.min_increase for r in members if r.params.cap_busiest_hours]
        caches[key] = FeatureCache(db, widest, union, grid(start, end, widest.scan_interval),
                                   candidates, chunk, min(trimming, default=None))
    return caches


def _one(db: Database, rs: RuleSet, start: datetime, end: datetime, plan: TickPlan | None,
         cache: FeatureCache | None) -> tuple[ReplaySummary, list[NewPrediction] | None]:
    """Walk one version and insert its new predictions (pending). Returns them with the
    version's pending ones from an earlier run, for :func:`backfill`; None: nothing to
    replay. As :func:`replay` does, a file that already holds the version's predictions
    goes on from them: no window of theirs is opened again, and none of them is changed."""
    began = time.perf_counter()
    ticks = grid(start, end, rs.params.scan_interval)
    summary = ReplaySummary(rs.version, ticks=len(ticks), skipping=True)
    if plan is None or cache is None:
        return summary, None
    ends = window_ends(db, rs.version)
    made, summary.evaluated_ticks = _walk(rs, ticks, plan, cache, ends)
    insert_rows(db, made)
    summary.predictions = len(made)
    summary.cards = None if plan.cards is None else len(plan.cards)
    summary.seconds = time.perf_counter() - began
    log.info("replayed %s (shared features): %d ticks evaluated, %d predictions in %.1f s",
             rs.version, summary.evaluated_ticks, summary.predictions, summary.seconds)
    return summary, pending_of(db, rs.version)  # the new ones and any left from before
