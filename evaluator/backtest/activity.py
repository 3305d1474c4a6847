"""Which replay ticks can change anything, so the replay may skip the others (pure).

A live worker evaluates every card at every tick; a backtest over months would repeat that tens
of thousands of times. Skipping a tick is exact when the tick provably inserts no prediction and
resolves no outcome, and that is decided from necessary conditions of the engine's rules:

Predictions (every signal of :data:`gpu_health.evaluator.rules.signals.SIGNALS` in use is one of
:data:`KNOWN_SIGNALS`). t0 is at most ``max_age`` (boundary_max_age) before the tick ``t``, and a
boundary value at most ``max_age`` before its boundary, so a card can only get a decision at
``t`` if, among its rows (any UUID: a superset),

- strong: in ``[t - 2 max_age, t]`` an uncorrectable count or a row-remap failure is above 0;
- correctable growth: in ``[t - L, t]`` (``L = g + 2 max_age``, the oldest growth boundary) the
  correctable count spans at least ``min_increase`` (d_0 >= min_increase), and a known
  correctable count lies in ``[t - B - 2 max_age, t - B]`` (the baseline boundary is known);
- pending-remap / retired-page growth: in ``[t - L, t]`` the value changed.

The store answers per card and bucket of width ``max_age`` (:func:`bucket_windows` turns the
spans above into bucket counts that contain them for every tick of the bucket). A card with a
prediction whose window ends at ``e`` cannot get another at a tick ``< e`` (one open window per
card, whatever the outcome), so it is no candidate there, and its decisions there are not even
offered to the insert (which would refuse them). A tick with no candidate card inserts nothing,
and a card that is no candidate at any tick needs no features at all.

Outcomes (the fault definition is uncorrectable-ECC growth only: no XID history in the file, or
no replayed version counts XIDs). A pending prediction is decided at the first tick at or after
the first fault event in its window (hit) or at or after its window end (miss, voided). Every
fault event is an increase point of the card's known uncorrectable count (same node, index and
UUID, over all its rows), so :class:`BackfillPlan` backfills, per prediction, at the tick of its
first such point in the window; if that decides nothing (the point is not an increase of the
window's own series), at the next one; at the latest at the window end.

When a condition does not hold (a new signal, XID fault events), the plans fall back to every
tick: slower, still exact. ``tests/evaluator/backtest/test_backtest_replay.py`` compares the
replay with a tick-by-tick :meth:`gpu_health.evaluator.worker.Worker.tick` run, row for row.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from gpu_health.clock import EPOCH, epoch_us
from gpu_health.evaluator.model import CardSlot, PhysicalCard
from gpu_health.evaluator.rules.params import RuleParams

KNOWN_SIGNALS: Final = frozenset({
    "ecc_uncorrected_present", "remap_failure_present", "ecc_corrected_growth",
    "remap_pending_growth", "retired_pages_growth",
})


def lookback(params: RuleParams) -> timedelta:
    """``L``: how far before a tick the rows of a growth decision can lie."""
    return params.growth_window + 2 * params.boundary_max_age


@dataclass(frozen=True, slots=True)
class BucketWindows:
    """Bucket width (``max_age``) and, for a tick in bucket k, how many buckets back hold each
    span of the module docstring: ``strong``, ``trend``, and ``base`` (from, to; widened by one
    bucket at its newer end, see
    :func:`gpu_health.evaluator.store.history.backtest_queries.active_ranges`)."""

    bucket: timedelta
    strong: int
    trend: int
    base: tuple[int, int]
    min_increase: int


def bucket_windows(params: RuleParams) -> BucketWindows:
    width = params.boundary_max_age
    w = width // timedelta(microseconds=1)

    def ceil(span: timedelta) -> int:
        return -(-(span // timedelta(microseconds=1)) // w)

    b = params.baseline // timedelta(microseconds=1)
    return BucketWindows(width, ceil(2 * width), ceil(lookback(params)),
                         (ceil(params.baseline + 2 * width), b // w - 2), params.min_increase)



def tick_grid(start: datetime, end: datetime, interval: timedelta) -> list[datetime]:
    """Ticks ``k * interval`` (from the Unix epoch) inside ``[start, end]``."""
    step = interval // timedelta(microseconds=1)
    first = -(-epoch_us(start) // step)
    last = epoch_us(end) // step
    return [EPOCH + timedelta(microseconds=k * step) for k in range(first, last + 1)]


def tick_at_or_after(at: datetime, interval: timedelta) -> datetime:
    """The first tick of the grid (multiples of ``interval`` from the Unix epoch) >= ``at``."""
    step = interval // timedelta(microseconds=1)
    return EPOCH + timedelta(microseconds=-(-epoch_us(at) // step) * step)


def tick_at_or_before(at: datetime, interval: timedelta) -> datetime:
    """The last tick of the grid <= ``at``."""
    step = interval // timedelta(microseconds=1)
    return EPOCH + timedelta(microseconds=epoch_us(at) // step * step)


Ranges = dict[tuple[CardSlot, str], list[tuple[int, int]]]


def bucket_ranges(ticks: Sequence[datetime], runs: Iterable[tuple[str, int, str, int, int]],
                  width: timedelta) -> Ranges:
    """(node, index, kind, first bucket, last bucket) runs -> per card and kind, merged
    inclusive ranges of tick indexes."""
    w = width // timedelta(microseconds=1)
    keys = [epoch_us(t) for t in ticks]
    ranges: Ranges = {}
    for node, gpu, kind, k0, k1 in runs:
        i0, i1 = bisect_left(keys, k0 * w), bisect_left(keys, (k1 + 1) * w) - 1
        if i1 < i0:
            continue
        spans = ranges.setdefault(((node, gpu), kind), [])
        if spans and spans[-1][1] + 1 >= i0:
            spans[-1] = (spans[-1][0], max(spans[-1][1], i1))
        else:
            spans.append((i0, i1))
    return ranges


class TickPlan:
    """Candidate ticks for predictions: how many (card, kind) pairs without an open window
    could fire at each tick, and ``cards``, those that can fire at some tick (the others'
    decisions are all None: their features need not be extracted). ``ranges=None`` makes
    every tick and every card a candidate (the fallback)."""

    def __init__(self, n: int, ranges: Ranges | None) -> None:
        self.ranges = ranges
        self._blocked_to: dict[CardSlot, int] = {}
        self._kinds: dict[CardSlot, list[str]] = {}
        self.cards: list[CardSlot] | None = None
        if ranges is None:
            self.cover = [1] * n
            return
        diff = [0] * (n + 1)
        for (card, kind), spans in ranges.items():
            self._kinds.setdefault(card, []).append(kind)
            for i0, i1 in spans:
                diff[i0] += 1
                diff[i1 + 1] -= 1
        self.cards = sorted(self._kinds)
        self.cover, running = [], 0
        for i in range(n):
            running += diff[i]
            self.cover.append(running)

    def next_candidate(self, i: int) -> int | None:
        while i < len(self.cover):
            if self.cover[i] > 0:
                return i
            i += 1
        return None

    def blocked(self, card: CardSlot, i: int) -> bool:
        """Whether ``card`` has an open window at tick ``i`` (its decisions would be refused)."""
        return i < self._blocked_to.get(card, 0)

    def block(self, card: CardSlot, current: int, until: int) -> None:
        """``card`` cannot get a prediction at ticks ``current + 1 .. until - 1``."""
        lo = max(current + 1, self._blocked_to.get(card, 0))
        self._blocked_to[card] = max(self._blocked_to.get(card, 0), until)
        if self.ranges is None:
            return
        for kind in self._kinds.get(card, ()):
            for i0, i1 in self.ranges[(card, kind)]:
                for i in range(max(i0, lo), min(i1 + 1, until)):
                    self.cover[i] -= 1

    def pick(self, j: int, end: int, limit: int, strong_ticks: int = 2) -> list[int]:
        """Ticks to extract features for in one statement, from ``j`` (always included) to
        ``end`` (exclusive), at most ``limit``: every candidate tick of a card's ``trend``
        runs, but only the first ``strong_ticks`` of its ``strong`` runs after its open window:
        an uncorrectable count above 0 at t0 fires at once and opens a window, so the later
        ticks would be wasted. A tick left out that turns out to be needed is extracted then
        (one more statement, same result)."""
        if self.ranges is None:
            return list(range(j, min(end, j + limit)))
        chosen = {j}
        for (card, kind), spans in self.ranges.items():
            budget = strong_ticks if kind == "strong" else limit
            start = max(j, self._blocked_to.get(card, 0))
            for i0, i1 in spans:
                if budget <= 0 or i0 >= end:
                    break
                for i in range(max(i0, start), min(i1 + 1, end)):
                    if budget <= 0:
                        break
                    chosen.add(i)
                    budget -= 1
        return sorted(chosen)[:limit]


class BackfillPlan:
    """Ticks at which a backfill can decide a pending prediction. ``points`` (node, index,
    UUID, time) are the uncorrectable increase points; ``None`` backfills at every tick."""

    def __init__(self, ticks: Sequence[datetime],
                 points: Iterable[tuple[str, int, str | None, datetime]] | None) -> None:
        self.ticks = ticks
        self.every_tick = points is None
        self._points: dict[PhysicalCard, list[datetime]] = {}
        for node, gpu, uuid, at in points or ():
            self._points.setdefault((node, gpu, uuid), []).append(at)
        self._heap: list[int] = []
        self._due: dict[int, set[str]] = {}
        self._open: dict[str, tuple[PhysicalCard, datetime, datetime]] = {}

    def watch(self, pid: str, card: PhysicalCard, t0: datetime,
              window_end: datetime) -> None:
        """A new pending prediction: backfill at its first possible deciding tick."""
        self._open[pid] = (card, t0, window_end)
        self._schedule(pid, t0)

    def _schedule(self, pid: str, after: datetime) -> None:
        card, _t0, window_end = self._open[pid]
        times = self._points.get(card, [])
        k = bisect_right(times, after)
        at = times[k] if k < len(times) and times[k] <= window_end else window_end
        i = bisect_left(self.ticks, at)
        if i >= len(self.ticks):
            return  # still pending when the period ends
        if i not in self._due:
            heapq.heappush(self._heap, i)
        self._due.setdefault(i, set()).add(pid)

    def done(self, i: int, resolved: Iterable[str]) -> None:
        """After the backfill at tick ``i``: forget the decided predictions, move the others
        that were due to their next possible tick."""
        for pid in resolved:
            self._open.pop(pid, None)
        for pid in self._due.pop(i, set()):
            if pid in self._open:
                self._schedule(pid, self.ticks[i])

    def next_tick(self, i: int) -> int | None:
        if self.every_tick:
            return i if i < len(self.ticks) else None
        while self._heap and (self._heap[0] < i or self._heap[0] not in self._due):
            heapq.heappop(self._heap)
        return self._heap[0] if self._heap else None
