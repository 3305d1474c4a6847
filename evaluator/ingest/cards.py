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
- NVIDIA's recovery action and fabric state are state sets (``gpu_health_recovery_action
  {action}``, ``gpu_health_fabric_state{state}``, 1 for the current one): known only when
  exactly one known state reads 1 and every other series reads 0; anything else (two at 1,
  none, a value other than 0/1) is unknown, counted as ``bad_state_set``. Pending page
  retirement, the fabric status and the PCIe link widths are values like a counter;
- ``gpu_health_clock_slowdown_seconds_total{reason}`` gives the stored reasons' time
  (``STORED_SLOWDOWNS``) in whole microseconds (the driver's unit; the exporter divides by
  10**6); the other reasons are read and left out, a series without a known reason counts as
  ``bad_reason_label``;
- each NVLink link's errors are read and left out (the card's total is stored);
- the NVSwitch SXid counts are the node's, not a card's (``sxid_series``: own label and bound
  rules), kept in ``CardExtraction.sxids``;
- other ``gpu_health_*`` series (not the exporter's ``gpu_health_exporter_*`` self-metrics)
  are contract series this evaluator does not know, e.g. from a newer exporter: they are
  ignored and counted as ``unknown_metric``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gpu_health.contract import (
    BANK_METRIC,
    COUNTER_KEYS,
    DETAIL_KEYS,
    INFO_METRIC,
    METRIC_PREFIX,
    NODE_LABEL,
    NODE_METRIC,
    SLOWDOWN_METRIC,
    SXID_METRIC,
    XID_METRIC,
    is_node_name,
)
from gpu_health.errors import ParseError
from gpu_health.evaluator.ingest.contract_series import (
    KEY_BY_NAME,
    SELF_METRIC_PREFIX,
    STATE_SETS,
    WANTED_METRICS,
    XID_LABEL,
    bank_key,
    slowdown_key,
)
from gpu_health.evaluator.ingest.exposition import RawSample, parse_samples
from gpu_health.evaluator.ingest.sxid_series import SxidCounts, SxidSeries
from gpu_health.evaluator.ingest.wire_values import (
    MAX_GPU_INDEX,
    MAX_XID,
    Parsed,
    Values,
    keep_count,
    seconds_as_micros,
    state_index,
    value_memo,
    whole_number,
)
from gpu_health.evaluator.model import UNKNOWN_DETAILS, CardDetails, Counters


@dataclass(frozen=True, slots=True)
class CardReading:
    """One card as one scrape saw it; unknown counters are None. ``xids`` holds the known XID
    counts as (xid code, count) sorted by code; an XID whose value is unknown is left out."""

    gpu_index: int
    gpu_uuid: str | None
    counters: Counters
    xids: tuple[tuple[int, int], ...] = ()
    details: CardDetails = UNKNOWN_DETAILS


@dataclass(frozen=True, slots=True)
class CardExtraction:
    """Cards of one exposition plus why some series or values were not used."""

    cards: tuple[CardReading, ...] = ()
    ignored_series: dict[str, int] = field(default_factory=dict)
    unknown_values: dict[str, int] = field(default_factory=dict)
    node_name: str | None = None  # gpu_health_node_info{node}: the exporter's own node name
    sxids: tuple[tuple[SxidSeries, int], ...] = ()  # the node's known SXid counts, sorted


class _CardBuilder:
    __slots__ = ("duplicates", "seen", "series", "states", "uuids", "values", "vendors",
                 "xid_duplicates", "xids")

    def __init__(self) -> None:
        self.values: dict[str, int | None] = {}  # counter and detail keys
        self.seen: set[str] = set()
        self.duplicates: set[str] = set()
        self.uuids: set[str] = set()
        self.vendors: set[str] = set()
        self.xids: dict[int, int | None] = {}
        self.xid_duplicates: set[int] = set()
        self.states: dict[str, dict[str, str]] = {}  # state-set key -> label -> value text
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

    def add_state(self, key: str, state: str, text: str) -> None:
        states = self.states.setdefault(key, {})
        if state in states:
            self.duplicates.add(key)
        states[state] = text

    def state(self, key: str, known: tuple[str, ...], unknown: Counter[str],
              parsed: Values) -> int | None:
        """The index in ``known`` of the one state reading 1 (the state set's invariant), else
        None."""
        states = self.states.get(key)
        if not states or key in self.duplicates:
            return None
        index = state_index({state: parsed(text)[0] for state, text in states.items()}, known)
        if index is None:
            unknown["bad_state_set"] += 1
        return index

    def add_xid(self, xid: int, parsed: Parsed, unknown: Counter[str]) -> None:
        keep_count(self.xids, self.xid_duplicates, xid, parsed, unknown)


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
    sxids = SxidCounts()
    parsed = value_memo()
    for name, labels, value in samples:
        key = KEY_BY_NAME.get(name)  # a counter or detail: the common case, one lookup
        xid = None
        if key is None:
            if name == XID_METRIC:
                xid = whole_number(labels.get(XID_LABEL, ""), MAX_XID)
                if xid is None:
                    ignored["no_xid_label" if XID_LABEL not in labels else "bad_xid_label"] += 1
                    continue
            elif name == BANK_METRIC:
                key = bank_key(labels, ignored)
                if key is None:
                    continue  # a bank-histogram sample without a known level
            elif name == NODE_METRIC:
                _node_name(labels, names, ignored)
                continue
            elif name == SXID_METRIC:
                sxids.add(labels, parsed(value), ignored, unknown)
                continue
            elif name == SLOWDOWN_METRIC:
                key = slowdown_key(labels, ignored)
                if key is None:
                    continue
            elif name not in STATE_SETS and name != INFO_METRIC:
                continue
        card = _card(labels, builders, ignored, seen)
        if card is None:
            continue
        if key is not None:
            card.add_counter(key, seconds_as_micros(value) if name == SLOWDOWN_METRIC
                             else parsed(value), unknown)
        elif xid is not None:
            card.add_xid(xid, parsed(value), unknown)
        elif (state_set := STATE_SETS.get(name)) is not None:
            card.add_state(state_set[1], labels.get(state_set[0], ""), value)
    cards = [_finish(index, builders[index], ignored, unknown, parsed)
             for index in sorted(builders)]
    if len(names) > 1:  # an exporter that names two nodes names none
        ignored["conflicting_node_name"] += len(names)
    node = next(iter(names)) if len(names) == 1 else None
    return CardExtraction(tuple(c for c in cards if c is not None), dict(ignored), dict(unknown),
                          node, sxids.finish())


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
    for _, key, known in STATE_SETS.values():
        card.values[key] = card.state(key, known, unknown, parsed)
    details = (None if k in card.duplicates else card.values.get(k) for k in DETAIL_KEYS)
    card_uuid = next(iter(card.uuids)) if card.uuids else None
    xids = tuple((x, v) for x, v in sorted(card.xids.items()) if v is not None)
    return CardReading(index, card_uuid, Counters(*values), xids, CardDetails(*details))


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
