"""An events file's cards -> cumulative counter histories on the reading grid (pure).

The history of a card is what an evaluator scraping it every ``step`` would have read: readings
on the ``step`` grid (an event is seen by the first reading at or after it), all counts 0 before
the first event, cumulative after. The card is only *observed* from ``lead_in`` before its first
event (so the first event is an increase, not a starting value) to its last event plus
``observe_after`` (one hit window): outside that span nothing is known about it, so no rows
exist there. Retired pages and row-remap counters are unknown throughout: event files do not
have them.

A card is ``node_id`` plus ``gpu_index``, taken from the trailing digits of the device column
(``DSA3`` -> 3) when every device name has some and no two names of one node share them, else
the rank of the name among the file's sorted device names. Event files carry no UUID, so
``gpu_uuid`` is unknown and card swaps cannot be seen.

:func:`history_from_slots` is the one definition: :func:`history` (in memory, tests and the
synthetic benchmarks) and :mod:`gpu_health.evaluator.backtest.events_import` (streamed from a
file of any size) both count events per reading and hand the counts to it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from gpu_health.clock import EPOCH, epoch_us
from gpu_health.evaluator.backtest.events import CardName, Event, Kind

_TRAILING_INT: Final = re.compile(r"(\d+)$")


@dataclass(frozen=True, slots=True)
class CardHistory:
    """Cumulative counts of one card on the reading grid. ``changes[0]`` is at ``start``; each
    entry is (reading time, uncorrectable, correctable) from that reading on; ``stop`` is the
    last reading. ``None`` counts are unknown."""

    node_id: str
    gpu_index: int
    label: str
    start: datetime
    stop: datetime
    changes: tuple[tuple[datetime, int | None, int | None], ...]
    events: int = 0


def gpu_indexes(cards: Iterable[tuple[str, str]]) -> tuple[dict[tuple[str, str], int], str]:
    """(node, device) -> gpu_index, and the rule used (see the module docstring)."""
    keys = sorted(set(cards))
    digits = {k: _TRAILING_INT.search(k[1]) for k in keys}
    by_digits = {k: int(m.group(1)) for k, m in digits.items() if m is not None}
    per_node = Counter((k[0], i) for k, i in by_digits.items())
    if len(by_digits) == len(keys) and all(n == 1 for n in per_node.values()) and \
            all(i < 2**31 for i in by_digits.values()):
        return by_digits, "trailing digits of the device name"
    ranks = {name: i for i, name in enumerate(sorted({k[1] for k in keys}))}
    return {k: ranks[k[1]] for k in keys}, "rank of the device name among the file's names"


def grid_ceil_us(us: int, step_us: int) -> int:
    """The first reading at or after ``us`` (epoch microseconds) on the ``step_us`` grid."""
    return -(-us // step_us) * step_us


def _at(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def history_from_slots(node_id: str, gpu_index: int, label: str,
                       slots: Iterable[tuple[int, int, int]], *, start: datetime,
                       stop: datetime, step: timedelta, events: int) -> CardHistory:
    """Cumulative counts of one card from its events counted per reading: ``slots`` are
    (reading in epoch microseconds, uncorrectable, correctable) in time order, each reading the
    first at or after its events. Observed on the ``step`` grid from ``start`` to ``stop`` (both
    snapped inward); a reading before ``start`` counts in the first one, one after ``stop`` is
    never seen."""
    step_us = step // timedelta(microseconds=1)
    first = grid_ceil_us(epoch_us(start), step_us)
    last = epoch_us(stop) // step_us * step_us
    unc = corr = 0
    changes: list[tuple[int, int, int]] = [(first, 0, 0)]
    for slot, n_unc, n_corr in slots:
        seen = max(slot, first)
        if seen > last:
            break
        unc, corr = unc + n_unc, corr + n_corr
        if changes[-1][0] == seen:
            changes[-1] = (seen, unc, corr)
        else:
            changes.append((seen, unc, corr))
    return CardHistory(node_id, gpu_index, label, _at(first), _at(last),
                       tuple((_at(us), u, c) for us, u, c in changes), events)


def history(node_id: str, gpu_index: int, label: str, events: Sequence[tuple[datetime, Kind]],
            *, start: datetime, stop: datetime, step: timedelta) -> CardHistory:
    """Cumulative counts of one card observed on the ``step`` grid from ``start`` to ``stop``
    (both snapped inward onto the grid); events outside that span are counted where they fall
    (before ``start``: already in the first reading)."""
    step_us = step // timedelta(microseconds=1)
    per_slot: dict[int, list[int]] = {}
    for at, kind in events:
        counts = per_slot.setdefault(grid_ceil_us(epoch_us(at), step_us), [0, 0])
        counts[0 if kind == "uncorrected" else 1] += 1
    slots = [(slot, u, c) for slot, (u, c) in sorted(per_slot.items())]
    return history_from_slots(node_id, gpu_index, label, slots, start=start, stop=stop,
                              step=step, events=len(events))


def card_histories(events: Iterable[Event], *, step: timedelta, lead_in: timedelta,
                   observe_after: timedelta) -> tuple[list[CardHistory], str]:
    """One history per card, observed from ``lead_in`` before its first event to
    ``observe_after`` past its last; also the gpu_index rule used. In memory: for small files
    and tests; :mod:`gpu_health.evaluator.backtest.events_import` streams large ones."""
    by_card: dict[CardName, list[tuple[datetime, Kind]]] = {}
    for e in events:
        by_card.setdefault((e.node_id, e.device), []).append((e.at, e.kind))
    indexes, rule = gpu_indexes(by_card)
    result = []
    for key in sorted(by_card):
        card_events = by_card[key]
        times = [at for at, _ in card_events]
        result.append(history(
            key[0], indexes[key], f"{key[0]}/{key[1]}", card_events,
            start=min(times) - lead_in, stop=max(times) + observe_after, step=step,
        ))
    return result, rule
