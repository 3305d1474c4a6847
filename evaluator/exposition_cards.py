"""From exporter samples to per-card readings: pure, no I/O, no clock.

Applies the contract in ``gpu_health.contract`` and the decisions of the ingest issue:

- a card is the series' ``gpu`` label (the physical index the vendor tool reports, never the row
  position); series without a usable ``gpu`` label are ignored and counted by reason;
- ``uuid=""`` means no UUID; series of one card that name two different UUIDs are conflicting
  data, so the whole card is dropped for this scrape (mixing two physical cards' counters would
  invent a trend);
- a counter value that is NaN, +/-Inf, negative, non-integer or above 2**63-1 (the BIGINT column)
  is unknown (None), counted by reason; two series for the same card and metric make that
  metric unknown (which of them is true cannot be decided), counted as ``duplicate``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from evaluator.exposition import RawSample, parse_samples
from evaluator.model import Counters
from gpu_health.contract import COUNTER_KEYS, INFO_METRIC, METRIC_NAMES, CounterKey

MAX_COUNTER = 2**63 - 1
MAX_GPU_INDEX = 2**31 - 1  # the store's gpu_index column is INTEGER

_KEY_BY_NAME: dict[str, CounterKey] = {name: key for key, name in METRIC_NAMES.items()}
WANTED_METRICS: frozenset[str] = frozenset((*METRIC_NAMES.values(), INFO_METRIC))


@dataclass(frozen=True, slots=True)
class CardReading:
    """One card as one scrape saw it; unknown counters are None."""

    gpu_index: int
    gpu_uuid: str | None
    counters: Counters


@dataclass(frozen=True, slots=True)
class CardExtraction:
    """Cards of one exposition plus why some series or values were not used."""

    cards: tuple[CardReading, ...] = ()
    ignored_series: dict[str, int] = field(default_factory=dict)
    unknown_values: dict[str, int] = field(default_factory=dict)


def counter_value(text: str) -> tuple[int | None, str | None]:
    """A counter value as written on the wire -> (value, None) or (None, reason it is unknown).

    Plain digit strings are converted exactly with ``int`` (a float would round values above
    2**53); everything else goes through ``float`` first.
    """
    if text.isascii() and text.isdigit():
        number = int(text)
        return (number, None) if number <= MAX_COUNTER else (None, "too_large")
    value = float(text)
    if math.isnan(value):
        return None, "nan"
    if math.isinf(value):
        return None, "inf"
    if value < 0:
        return None, "negative"
    if not value.is_integer():
        return None, "non_integer"
    if value > MAX_COUNTER:
        return None, "too_large"
    return int(value), None


def _gpu_index(text: str) -> int | None:
    if not (text.isascii() and text.isdigit()):
        return None
    index = int(text)
    return index if index <= MAX_GPU_INDEX else None


class _CardBuilder:
    __slots__ = ("duplicates", "seen", "series", "uuids", "values")

    def __init__(self) -> None:
        self.values: dict[CounterKey, int | None] = {}
        self.seen: set[CounterKey] = set()
        self.duplicates: set[CounterKey] = set()
        self.uuids: set[str] = set()
        self.series = 0


def extract_cards(samples: Iterable[RawSample]) -> CardExtraction:
    """Group contract series by ``gpu`` label into :class:`CardReading` (sorted by index)."""
    builders: dict[int, _CardBuilder] = {}
    ignored: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    for sample in samples:
        key = _KEY_BY_NAME.get(sample.name)
        if key is None and sample.name != INFO_METRIC:
            continue
        gpu = sample.labels.get("gpu")
        if gpu is None:
            ignored["no_gpu_label"] += 1
            continue
        index = _gpu_index(gpu)
        if index is None:
            ignored["bad_gpu_label"] += 1
            continue
        card = builders.setdefault(index, _CardBuilder())
        card.series += 1
        uuid = sample.labels.get("uuid", "")
        if uuid:
            card.uuids.add(uuid)
        if key is None:
            continue  # gpu_info: identity only
        if key in card.seen:
            card.duplicates.add(key)
            unknown["duplicate"] += 1
            continue
        card.seen.add(key)
        value, reason = counter_value(sample.value)
        if reason is not None:
            unknown[reason] += 1
        card.values[key] = value
    cards = [_finish(index, builders[index], ignored) for index in sorted(builders)]
    return CardExtraction(tuple(c for c in cards if c is not None), dict(ignored), dict(unknown))


def _finish(index: int, card: _CardBuilder, ignored: Counter[str]) -> CardReading | None:
    if len(card.uuids) > 1:
        ignored["conflicting_uuid"] += card.series
        return None
    values = (None if k in card.duplicates else card.values.get(k) for k in COUNTER_KEYS)
    card_uuid = next(iter(card.uuids)) if card.uuids else None
    return CardReading(index, card_uuid, Counters(*values))


def parse_cards(text: str) -> CardExtraction:
    """Validate a whole exposition and extract its cards (raises ParseError on bad text)."""
    return extract_cards(parse_samples(text, WANTED_METRICS))
