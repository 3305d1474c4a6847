"""The shared replay's features: one group's feature rows per tick, read once for all its
versions (:mod:`gpu_health.evaluator.backtest.batch`).

A *feature group* is the versions with the same growth window, baseline span, boundary age and
scan interval: their boundary values are the same. The rows are read with the group's largest
``consecutive_windows`` (``corrected[i]`` is at ``t0 - i g`` whatever ``k`` is, so each
version cuts the tuple to its own), for the union of the cards any version of the group can
fire for, at the union of their candidate ticks (before any window blocks them), ``chunk``
ticks per statement in time order. Each row carries what a version's quick test needs (the
threshold-free part of :func:`gpu_health.evaluator.rules.signals.could_fire` and the increase it
compares with ``min_increase``); features are built only for the rows a version must decide in full.

When a version of the group reads the weak layer (``weak_gate``), the rows carry its values
for every version of the group (those that do not read it ignore them).

When a version of the group caps its growth windows' busiest hours (``cap_busiest_hours``), the
rows whose last-window increase reaches the smallest ``min_increase`` of those versions also get
their hourly correctable values (:mod:`gpu_health.evaluator.store.readings.hourly`, over the group's
widest span), one more statement per chunk.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.backtest.replay import DEFAULT_CHUNK, HORIZON
from gpu_health.evaluator.model import CardSlot
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.predictions.features import (
    feature_rows,
    row_quick_test,
    row_to_features,
)
from gpu_health.evaluator.store.readings.hourly import hourly_values, hours_needed


@dataclass(slots=True)
class CachedFeatures:
    """One card's feature row at one tick, with what every version's quick test needs; the
    features themselves are built only for a version that must decide in full."""

    card: CardSlot
    t0: datetime
    always: bool  # a strong, pending-remap or retired-page signal may fire: decide in full
    increase: int | None  # the last growth window's correctable increase (None: unknown)
    row: Any
    built: CardFeatures | None = None
    hourly: tuple[int | None, ...] | None = None

    def features(self, params: RuleParams) -> CardFeatures:
        if self.built is None:
            self.built = row_to_features(self.row, SOURCE_REAL, params)
            if self.hourly is not None:
                self.built = replace(self.built, hourly=self.hourly)
        return self.built


def entry(row: Any, k: int) -> CachedFeatures:
    """The quick test's inputs, read off a :func:`feature_rows` row
    (:func:`gpu_health.evaluator.store.predictions.features.row_quick_test`)."""
    always, increase = row_quick_test(row, k)
    return CachedFeatures((str(row[1]), int(row[2])), row[4], always, increase, row)


@dataclass(slots=True)
class FeatureCache:
    """The feature rows of one group's cards at its candidate ticks (widest ``k``), read in
    order, ``chunk`` candidate ticks per statement, as versions ask for them."""

    db: Database
    params: RuleParams
    cards: list[CardSlot] | None
    ticks: list[datetime]
    candidates: list[int]  # tick indexes at which some version of the group may fire
    chunk: int = DEFAULT_CHUNK
    hourly_from: int | None = None  # read hourly values of rows whose increase reaches this
    at: dict[datetime, list[CachedFeatures]] = field(default_factory=dict)
    statements: int = 0

    def entries(self, j: int) -> list[CachedFeatures]:
        """Tick ``j``'s entries; when missing, those of the next candidate ticks from it
        (within ``HORIZON``: one statement reads a narrow time range)."""
        now = self.ticks[j]
        if now not in self.at:
            chosen = [now]
            for k in self.candidates[bisect_left(self.candidates, j + 1):]:
                t = self.ticks[k]
                if len(chosen) >= self.chunk or t >= now + HORIZON:
                    break
                if t not in self.at:
                    chosen.append(t)
            self.at.update((t, []) for t in chosen)
            k = self.params.consecutive_windows
            for row in feature_rows(self.db, chosen, SOURCE_REAL, self.params,
                                    chunk=len(chosen), cards=self.cards):
                self.at[row[0]].append(entry(row, k))
            self.statements += 1
            self._hourly([e for t in chosen for e in self.at[t]])
        return self.at[now]

    def _hourly(self, entries: list[CachedFeatures]) -> None:
        least = self.hourly_from
        if least is None:
            return
        wanted = [e for e in entries if e.increase is not None and e.increase >= least]
        p = self.params
        heads = [(e.card[0], e.card[1], None if e.row[3] is None else str(e.row[3]), e.t0)
                 for e in wanted]
        for e, values in zip(wanted, hourly_values(self.db, SOURCE_REAL, heads, hours_needed(p),
                                                   p.boundary_max_age), strict=True):
            e.hourly = values
        self.statements += 1 if wanted else 0
