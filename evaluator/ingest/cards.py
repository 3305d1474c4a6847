"""From exporter samples to per-card readings: pure, no I/O, no clock.

Applies the contract in ``gpu_health.contract``:

- a card is the series' ``gpu`` label (the physical index the vendor tool reports, never the row
  position); series without a usable ``gpu`` label are ignored and counted by reason;
- ``uuid=""`` means no UUID; series of one card that name two different UUIDs, or two different
  vendors (an NVIDIA and an Ascend card both reporting index 0 on one node), are two physical
  cards in one slot, so the whole card is dropped for this scrape (mixing their counters would
  invent a trend);
- a counter value that is NaN, +/-Inf, negative, non-integer or above 2**63-1 (the BIGINT column)
  is unknown (None), counted by reason; two series for the same card and metric make that
  metric unknown (which of them is true cannot be decided), counted as ``duplicate``;
- ``gpu_health_xid_errors_total{xid}`` gives the card's XID counts (same value rules; a series
  without a whole-number ``xid`` label is ignored). It is not one of the five counters and never
  fills one;
- NVIDIA's recovery action is a state set (``gpu_health_recovery_action{action}``, 1 for the
  current action): it is known only when exactly one known action reads 1 and every other
  series reads 0; anything else (two actions at 1, none, a value other than 0/1) is unknown,
  counted as ``bad_state_set``. Pending page retirement is a 0/1 value like a counter;
- other ``gpu_health_*`` series (not the exporter's ``gpu_health_exporter_*`` self-metrics)
  are contract series this evaluator does not know, e.g. from a newer exporter: they are
  ignored and counted as ``unknown_metric``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gpu_health.contract import (
    BANK_LEVELS,
    BANK_METRIC,
    COUNTER_KEYS,
    DETAIL_KEYS,
    INFO_METRIC,
    METRIC_NAMES,
    METRIC_PREFIX,
    NODE_LABEL,
    NODE_METRIC,
    PAGES_PENDING_METRIC,
    RECOVERY_ACTIONS,
    RECOVERY_METRIC,
    REMAP_ROW_METRICS,
    XID_METRIC,
    is_node_name,
)
from gpu_health.errors import ParseError
from gpu_health.evaluator.ingest.exposition import RawSample, parse_samples
from gpu_health.evaluator.ingest.wire_values import (
    MAX_GPU_INDEX,
    MAX_XID,
    Parsed,
    Values,
    value_memo,
    whole_number,
)
from gpu_health.evaluator.model import UNKNOWN_DETAILS, Counters, MemoryDetails

XID_LABEL = "xid"
SELF_METRIC_PREFIX = METRIC_PREFIX + "exporter_"
RECOVERY_KEY = "recovery_action"

_KEY_BY_NAME: dict[str, str] = {name: key for key, name in METRIC_NAMES.items()}
_KEY_BY_NAME.update({name: key for key, name in REMAP_ROW_METRICS.items()})
_KEY_BY_NAME[PAGES_PENDING_METRIC] = "retired_pages_pending"
WANTED_METRICS: frozenset[str] = frozenset((*_KEY_BY_NAME, INFO_METRIC, XID_METRIC,
                                            BANK_METRIC, RECOVERY_METRIC, NODE_METRIC))


@dataclass(frozen=True, slots=True)
class CardReading:
    """One card as one scrape saw it; unknown counters are None. ``xids`` holds the known XID
    counts as (xid code, count) sorted by code; an XID whose value is unknown is left out."""

    gpu_index: int
    gpu_uuid: str | None
    counters: Counters
    xids: tuple[tuple[int, int], ...] = ()
    details: MemoryDetails = UNKNOWN_DETAILS


@dataclass(frozen=True, slots=True)
class CardExtraction:
    """Cards of one exposition plus why some series or values were not used."""

    cards: tuple[CardReading, ...] = ()
    ignored_series: dict[str, int] = field(default_factory=dict)
    unknown_values: dict[str, int] = field(default_factory=dict)
    node_name: str | None = None  # gpu_health_node_info{node}: the exporter's own node name


class _CardBuilder:
    __slots__ = ("duplicates", "recovery", "seen", "series", "uuids", "values", "vendors",
                 "xid_duplicates", "xids")

    def __init__(self) -> None:
        self.values: dict[str, int | None] = {}  # counter and row-remap detail keys
        self.seen: set[str] = set()
        self.duplicates: set[str] = set()
        self.uuids: set[str] = set()
        self.vendors: set[str] = set()
        self.xids: dict[int, int | None] = {}
        self.xid_duplicates: set[int] = set()
        self.recovery: dict[str, str] = {}  # action label -> value text, as scraped
        self.series = 0

    def add_counter(self, key: str, parsed: Parsed, unknown: Counter[str]) -> None:
        if key in self.seen:
            self.duplicates.add(key)
            unknown["duplicate"] += 1
            return
        self.seen.add(key)
        value, reason = parsed
        if reason is not None:
            unknown[reason] += 1
        self.values[key] = value

    def add_recovery(self, action: str, text: str) -> None:
        if action in self.recovery:
            self.duplicates.add(RECOVERY_KEY)
        self.recovery[action] = text

    def recovery_action(self, unknown: Counter[str], parsed: Values) -> int | None:
        """The NVML value of the one action reading 1 (the state set's invariant), else None."""
        if not self.recovery or RECOVERY_KEY in self.duplicates:
            return None
        values = {action: parsed(text)[0] for action, text in self.recovery.items()}
        current = [a for a, v in values.items() if v == 1]
        if len(current) != 1 or current[0] not in RECOVERY_ACTIONS \
                or any(v not in (0, 1) for v in values.values()):
            unknown["bad_state_set"] += 1
            return None
        return RECOVERY_ACTIONS.index(current[0])

    def add_xid(self, xid: int, parsed: Parsed, unknown: Counter[str]) -> None:
        if xid in self.xids or xid in self.xid_duplicates:
            self.xid_duplicates.add(xid)
            self.xids.pop(xid, None)
            unknown["duplicate"] += 1
            return
        value, reason = parsed
        if reason is not None:
            unknown[reason] += 1
        self.xids[xid] = value


# Label sets by id (shared by a card's families), kept beside what they gave so ids stay unique.
_Seen = dict[int, tuple[Mapping[str, str], "_CardBuilder | str"]]


def _card(labels: Mapping[str, str], builders: dict[int, _CardBuilder], ignored: Counter[str],
          seen: _Seen) -> _CardBuilder | None:
    """The builder of the series' card (created on first sight); None when the label is bad."""
    entry = seen.get(id(labels))
    if entry is None:
        entry = seen[id(labels)] = (labels, _card_of(labels, builders))
    card = entry[1]
    if isinstance(card, str):
        ignored[card] += 1
        return None
    card.series += 1
    return card


def _card_of(labels: Mapping[str, str], builders: dict[int, _CardBuilder]) -> _CardBuilder | str:
    """The card a label set names, with its UUID and vendor noted; else why not."""
    gpu = labels.get("gpu")
    if gpu is None:
        return "no_gpu_label"
    index = whole_number(gpu, MAX_GPU_INDEX)
    if index is None:
        return "bad_gpu_label"
    card = builders.get(index)
    if card is None:
        card = builders[index] = _CardBuilder()
    if uuid := labels.get("uuid"):
        card.uuids.add(uuid)
    if vendor := labels.get("vendor"):
        card.vendors.add(vendor)
    return card


def extract_cards(samples: Iterable[RawSample]) -> CardExtraction:
    """Group contract series by ``gpu`` label into :class:`CardReading` (sorted by index)."""
    builders: dict[int, _CardBuilder] = {}
    seen: _Seen = {}
    ignored: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    names: set[str] = set()
    parsed = value_memo()
    for name, labels, value in samples:
        key = _KEY_BY_NAME.get(name)  # a counter or detail: the common case, one lookup
        xid = None
        if key is None:
            if name == XID_METRIC:
                xid = whole_number(labels.get(XID_LABEL, ""), MAX_XID)
                if xid is None:
                    ignored["no_xid_label" if XID_LABEL not in labels else "bad_xid_label"] += 1
                    continue
            elif name == BANK_METRIC:
                key = _bank_key(labels, ignored)
                if key is None:
                    continue  # a bank-histogram sample without a known level
            elif name == NODE_METRIC:
                _node_name(labels, names, ignored)
                continue
            elif name != RECOVERY_METRIC and name != INFO_METRIC:
                continue
        card = _card(labels, builders, ignored, seen)
        if card is None:
            continue
        if key is not None:
            card.add_counter(key, parsed(value), unknown)
        elif xid is not None:
            card.add_xid(xid, parsed(value), unknown)
        elif name == RECOVERY_METRIC:
            card.add_recovery(labels.get("action", ""), value)
    cards = [_finish(index, builders[index], ignored, unknown, parsed)
             for index in sorted(builders)]
    if len(names) > 1:  # an exporter that names two nodes names none
        ignored["conflicting_node_name"] += len(names)
    node = next(iter(names)) if len(names) == 1 else None
    return CardExtraction(tuple(c for c in cards if c is not None), dict(ignored), dict(unknown),
                          node)


def with_unknown_metrics(extraction: CardExtraction, unused: Mapping[str, int]) -> CardExtraction:
    """``extraction`` counting as ``unknown_metric`` the skipped (``unused``) contract series."""
    skipped = sum(n for name, n in unused.items()
                  if name.startswith(METRIC_PREFIX) and not name.startswith(SELF_METRIC_PREFIX))
    if not skipped:
        return extraction
    ignored = dict(extraction.ignored_series)
    ignored["unknown_metric"] = ignored.get("unknown_metric", 0) + skipped
    return replace(extraction, ignored_series=ignored)


def _node_name(labels: Mapping[str, str], names: set[str], ignored: Counter[str]) -> None:
    name = labels.get(NODE_LABEL, "")
    if not is_node_name(name):
        ignored["bad_node_label"] += 1
    else:
        names.add(name)


def _finish(index: int, card: _CardBuilder, ignored: Counter[str], unknown: Counter[str],
            parsed: Values) -> CardReading | None:
    if len(card.uuids) > 1:
        ignored["conflicting_uuid"] += card.series
        return None
    if len(card.vendors) > 1:
        ignored["conflicting_vendor"] += card.series
        return None
    values = (None if k in card.duplicates else card.values.get(k) for k in COUNTER_KEYS)
    card.values[RECOVERY_KEY] = card.recovery_action(unknown, parsed)
    details = (None if k in card.duplicates else card.values.get(k) for k in DETAIL_KEYS)
    card_uuid = next(iter(card.uuids)) if card.uuids else None
    xids = tuple((x, v) for x, v in sorted(card.xids.items()) if v is not None)
    return CardReading(index, card_uuid, Counters(*values), xids, MemoryDetails(*details))


def _bank_key(labels: Mapping[str, str], ignored: Counter[str]) -> str | None:
    """The detail key of a bank-histogram sample, or None (counted) without a known level."""
    level = labels.get("level", "")
    if level not in BANK_LEVELS:
        ignored["bad_level_label"] += 1
        return None
    return "remap_banks_" + level


def parse_cards(text: str, *, sample_limit: int | None = None,
                max_cards: int | None = None) -> CardExtraction:
    """Validate a whole exposition and extract its cards (raises ParseError on bad text, and
    with reason ``sample_limit`` above ``sample_limit`` samples or ``max_cards`` cards)."""
    unused: Counter[str] = Counter()
    extraction = with_unknown_metrics(
        extract_cards(parse_samples(text, WANTED_METRICS, unused, sample_limit)), unused)
    if max_cards is not None and len(extraction.cards) > max_cards:
        raise ParseError(f"{len(extraction.cards)} cards, more than {max_cards} "
                         "(scrape.max_cards_per_target): the target is refused whole",
                         reason="sample_limit")
    return extraction
