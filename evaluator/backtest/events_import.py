"""An events file -> stored rows, in memory bounded by the cards it names, not by its rows.

The file was read once and checked (:func:`gpu_health.evaluator.backtest.events.parse_events`:
counts only). This second read streams it in chunks of :data:`CHUNK` events into a staging table
of the backtest file, as (card number, reading, uncorrectable?): the reading is the first on the
``step`` grid at or after the event, computed here by the same function the in-memory path uses.
The store counts the events per card and reading; the counts come back a few cards at a time
(at most about :data:`CHUNK` events' worth, and never more rows than a card has readings) and
become each card's history by :func:`~gpu_health.evaluator.backtest.card_history.
history_from_slots`, whose runs of constant counts are staged and expanded by the write rule's
closed form (:mod:`gpu_health.evaluator.backtest.history`). What stays in memory: per card its
name, event count and first and last event time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby
from typing import Final

from gpu_health.clock import EPOCH, epoch_us
from gpu_health.errors import ConfigError
from gpu_health.evaluator.backtest.card_history import (
    CardHistory,
    gpu_indexes,
    grid_ceil_us,
    history_from_slots,
)
from gpu_health.evaluator.backtest.events import CardName, Event, EventFile
from gpu_health.evaluator.backtest.history import expand_staged, segments
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest_import import (
    append_segments,
    create_event_stage,
    create_segments,
    drop_event_stage,
    event_slots,
    stage_events,
)

CHUNK: Final = 100_000  # events per staging statement, and per read-back of counts
_US: Final = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class EventsWritten:
    """What the import wrote."""

    rows: int
    cards: int
    gpu_index_rule: str
    since: datetime  # the first reading of any card
    until: datetime  # the last


@dataclass(frozen=True, slots=True)
class Observation:
    """How events become readings: the grid, and how long before the first and after the last
    event of a card it is observed."""

    step: timedelta
    lead_in: timedelta
    observe_after: timedelta


def write_events(db: Database, events: Iterable[Event], file: EventFile, how: Observation, *,
                 keepalive: timedelta, progress: Callable[[int], None] | None = None,
                 chunk: int = CHUNK) -> EventsWritten:
    """Stage ``events`` (the second read of ``file``), build each card's history and store the
    write rule's rows; ConfigError when the file names no correctable or uncorrectable event."""
    names = sorted(file.cards)
    if not names:
        raise ConfigError("no correctable or uncorrectable event")
    indexes, rule = gpu_indexes(names)
    spans = _stage(db, events, {name: i for i, name in enumerate(names)}, how.step, chunk)
    create_segments(db)
    since = until = None
    for batch in _histories(db, names, indexes, spans, file, how, chunk):
        append_segments(db, segments(batch))
        first, last = min(h.start for h in batch), max(h.stop for h in batch)
        since = first if since is None else min(since, first)
        until = last if until is None else max(until, last)
    drop_event_stage(db)
    assert since is not None and until is not None
    rows = expand_staged(db, since, until, step=how.step, keepalive=keepalive, progress=progress)
    return EventsWritten(rows, len(names), rule, since, until)


def _stage(db: Database, events: Iterable[Event], ids: dict[CardName, int],
           step: timedelta, chunk: int) -> list[list[int]]:
    """Every event into the staging table; [first, last] event time (epoch microseconds) of
    each card by its number."""
    step_us = step // _US
    spans = [[2**63, -(2**63)] for _ in ids]
    create_event_stage(db)
    cards: list[int] = []
    slots: list[int] = []
    unc: list[bool] = []
    for e in events:
        card, us = ids[(e.node_id, e.device)], epoch_us(e.at)
        span = spans[card]
        span[0], span[1] = min(span[0], us), max(span[1], us)
        cards.append(card)
        slots.append(grid_ceil_us(us, step_us))
        unc.append(e.kind == "uncorrected")
        if len(cards) >= chunk:
            stage_events(db, cards, slots, unc)
            cards, slots, unc = [], [], []
    if cards:
        stage_events(db, cards, slots, unc)
    return spans


def _card_ranges(counts: Sequence[int], chunk: int) -> Iterator[tuple[int, int]]:
    """[first, stop) card numbers holding about ``chunk`` events each (one card at least)."""
    first = total = 0
    for card, n in enumerate(counts):
        if total and total + n > chunk:
            yield first, card
            first, total = card, 0
        total += n
    if first < len(counts):
        yield first, len(counts)


def _histories(db: Database, names: list[CardName], indexes: dict[CardName, int],
               spans: list[list[int]], file: EventFile,
               how: Observation, chunk: int) -> Iterator[list[CardHistory]]:
    """The cards' histories, a few cards at a time, in card order."""
    for first, stop in _card_ranges([file.cards[name] for name in names], chunk):
        batch = []
        for card, rows in groupby(event_slots(db, first, stop), key=lambda r: r[0]):
            name = names[card]
            lo, hi = spans[card]
            batch.append(history_from_slots(
                name[0], indexes[name], f"{name[0]}/{name[1]}",
                ((slot, n_unc, n_corr) for _, slot, n_unc, n_corr in rows),
                start=EPOCH + lo * _US - how.lead_in, stop=EPOCH + hi * _US + how.observe_after,
                step=how.step, events=file.cards[name]))
        if batch:
            yield batch
