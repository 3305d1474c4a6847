"""Error-event CSV files -> cumulative counter histories per card (pure: rows in, data out).

One CSV row is one error event of one card: key columns naming the card, a time, and a type.
Types map to ``correctable`` or ``uncorrectable``; every other type is refused unless listed as
ignored (an unmapped ``XID`` column silently dropped would shrink the fault count). Times are Unix
seconds or ISO 8601 with a zone in its RFC 3339 form (:mod:`gpu_health.timestamps`); a
zone-less time is refused (its offset is a guess).

A card is ``node_id`` (the node columns joined with ``/``) plus ``gpu_index``, taken from the
trailing digits of the device column (``DSA3`` -> 3) when every device name has some and no two
names of one node share them, else the rank of the name among the file's sorted device names.
Event files carry no UUID, so ``gpu_uuid`` is unknown and card swaps cannot be seen.

The history of a card (:func:`card_histories`) is what an evaluator scraping it every ``step``
would have read: readings on the ``step`` grid (an event is seen by the first reading at or after
it), all counts 0 before the first event, cumulative after. The card is only *observed* from
``lead_in`` before its first event (so the first event is an increase, not a starting value) to
its last event plus ``observe_after`` (one hit window): outside that span nothing is known about
it, so no rows exist there. Retired pages and row-remap counters are unknown throughout: event
files do not have them.

The Calchas preset reads the public HBM dataset of Wu et al. (USENIX ATC '24): card = Datacenter
+ Server + Name, ``CE`` correctable, ``UER``/``UEO`` uncorrectable.
"""

from __future__ import annotations

import contextlib
import csv
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from gpu_health.clock import EPOCH, epoch_us
from gpu_health.errors import ConfigError
from gpu_health.timestamps import parse_timestamp

Kind = Literal["corrected", "uncorrected"]
MAX_LISTED: Final = 20
MAX_TYPES: Final = 1000  # distinct event-type values: more means a wrong type column
SHOWN_CHARS: Final = 60  # of a bad field, in a message (a 50 MB field is not echoed)


class _Problems(list[str]):
    """The first :data:`MAX_LISTED` problems, and how many more there were: a file of five
    million bad rows costs twenty messages, not five million."""

    more = 0

    def append(self, problem: str) -> None:
        if len(self) < MAX_LISTED:
            super().append(problem)
        else:
            self.more += 1


def _shown(text: str | None) -> str:
    text = text or ""
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")
_TRAILING_INT: Final = re.compile(r"(\d+)$")


@dataclass(frozen=True, slots=True)
class EventColumns:
    """How to read an events file."""

    node: tuple[str, ...]
    gpu: str
    time: str
    type: str
    correctable: frozenset[str]
    uncorrectable: frozenset[str]
    ignore: frozenset[str] = frozenset()


CALCHAS: Final = EventColumns(
    node=("Datacenter", "Server"), gpu="Name", time="Time", type="EccType",
    correctable=frozenset({"CE"}), uncorrectable=frozenset({"UER", "UEO"}),
)
PRESETS: Final[dict[str, EventColumns]] = {"calchas": CALCHAS}


@dataclass(frozen=True, slots=True)
class Event:
    node_id: str
    device: str
    at: datetime
    kind: Kind


@dataclass(frozen=True, slots=True)
class EventFile:
    events: tuple[Event, ...]
    rows: int
    by_type: dict[str, int]  # every type seen, with its count (ignored ones included)
    ignored: int


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


def parse_time(text: str) -> datetime | None:
    """A cell's time through :func:`gpu_health.timestamps.parse_timestamp` (surrounding blanks
    ignored); None when it is not one."""
    try:
        return parse_timestamp(text.strip())
    except ValueError:
        return None


def _row(row: dict[str, str], line: int, columns: EventColumns,
         problems: list[str]) -> Event | None:
    """One row as an event (None: a problem was recorded, or the type is ignored)."""
    kind_text = (row.get(columns.type) or "").strip()
    at = parse_time(row.get(columns.time) or "")
    node = "/".join((row.get(c) or "").strip() for c in columns.node)
    device = (row.get(columns.gpu) or "").strip()
    if at is None:
        problems.append(f"line {line}: time {_shown(row.get(columns.time))} is neither Unix "
                        "seconds nor ISO 8601 with a zone")
    if not device or not all((row.get(c) or "").strip() for c in columns.node):
        problems.append(f"line {line}: empty card key column")
    kind: Kind | None = ("corrected" if kind_text in columns.correctable else
                         "uncorrected" if kind_text in columns.uncorrectable else None)
    if kind is None or at is None or not device:
        return None
    return Event(node, device, at, kind)


def _read_rows(reader: csv.DictReader[str], origin: str, columns: EventColumns,
               events: list[Event], types: Counter[str], problems: _Problems) -> int:
    """Every row into ``events``; how many rows. A field above the csv module's limit, a NUL
    byte or bytes that are not UTF-8 end the read with one line naming where."""
    rows = 0
    with _unreadable_as_config_error(reader, origin):
        for rows, row in enumerate(reader, start=1):
            kind = (row.get(columns.type) or "").strip()
            if kind not in types and len(types) >= MAX_TYPES:
                raise ConfigError(f"{origin}: line {rows + 1}: more than {MAX_TYPES} distinct "
                                  f"values in the type column {columns.type!r}: is it the "
                                  "right column?")
            types[kind] += 1
            event = _row(row, rows + 1, columns, problems)  # the header is line 1
            if event is not None:
                events.append(event)
    return rows


@contextlib.contextmanager
def _unreadable_as_config_error(reader: csv.DictReader[str], origin: str) -> Iterator[None]:
    """A field past the csv module's limit, or bytes that are not UTF-8, as one line."""
    try:
        yield
    except csv.Error as exc:  # the reader has not counted the line it failed on
        raise ConfigError(f"{origin}: line {reader.line_num + 1}: {exc}") from None
    except UnicodeDecodeError as exc:  # decoded by the chunk: no line to name
        raise ConfigError(f"{origin}: not UTF-8 text ({exc.reason})") from None


def parse_events(lines: Iterable[str], columns: EventColumns, origin: str) -> EventFile:
    """Read every row; ConfigError lists every problem (missing columns, bad times, unmapped
    types) instead of dropping rows."""
    reader = csv.DictReader(lines)
    with _unreadable_as_config_error(reader, origin):
        header = reader.fieldnames or []
    wanted = (*columns.node, columns.gpu, columns.time, columns.type)
    missing = [c for c in dict.fromkeys(wanted) if c not in header]
    if missing:
        raise ConfigError(f"{origin}: missing column(s) {', '.join(missing)} (header: "
                          f"{', '.join(_shown(h) for h in header[:50]) or 'none'})")
    problems = _Problems()
    events: list[Event] = []
    types: Counter[str] = Counter()
    rows = _read_rows(reader, origin, columns, events, types, problems)
    mapped = columns.correctable | columns.uncorrectable | columns.ignore
    unmapped = sorted(t for t in types if t not in mapped)
    if unmapped:
        problems.insert(0, f"event type(s) {', '.join(_shown(t) for t in unmapped[:20])} are "
                           "neither correctable, uncorrectable nor ignored: map or ignore them")
    if not rows:
        problems.append("no event rows")
    if problems:
        shown = list(problems)
        if problems.more:
            shown.append(f"... and {problems.more} more problem(s)")
        raise ConfigError([f"{origin}: {p}" for p in shown])
    ignored = sum(n for t, n in types.items() if t in columns.ignore)
    return EventFile(tuple(events), rows, dict(types), ignored)


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


def _grid_ceil(at: datetime, step_us: int) -> datetime:
    us = epoch_us(at)
    return EPOCH + timedelta(microseconds=-(-us // step_us) * step_us)


def _grid_floor(at: datetime, step_us: int) -> datetime:
    return EPOCH + timedelta(microseconds=epoch_us(at) // step_us * step_us)



def history(node_id: str, gpu_index: int, label: str, events: Sequence[tuple[datetime, Kind]],
            *, start: datetime, stop: datetime, step: timedelta) -> CardHistory:
    """Cumulative counts of one card observed on the ``step`` grid from ``start`` to ``stop``
    (both snapped inward onto the grid); events outside that span are counted where they fall
    (before ``start``: already in the first reading)."""
    step_us = epoch_us(EPOCH + step)
    first, last = _grid_ceil(start, step_us), _grid_floor(stop, step_us)
    unc = corr = 0
    changes: list[tuple[datetime, int | None, int | None]] = [(first, 0, 0)]
    for at, kind in sorted(events, key=lambda e: e[0]):
        seen = max(_grid_ceil(at, step_us), first)
        if seen > last:
            break
        unc, corr = (unc + 1, corr) if kind == "uncorrected" else (unc, corr + 1)
        if changes[-1][0] == seen:
            changes[-1] = (seen, unc, corr)
        else:
            changes.append((seen, unc, corr))
    return CardHistory(node_id, gpu_index, label, first, last, tuple(changes), len(events))


def card_histories(file: EventFile, *, step: timedelta, lead_in: timedelta,
                   observe_after: timedelta) -> tuple[list[CardHistory], str]:
    """One history per card, observed from ``lead_in`` before its first event to
    ``observe_after`` past its last; also the gpu_index rule used."""
    by_card: dict[tuple[str, str], list[tuple[datetime, Kind]]] = {}
    for e in file.events:
        by_card.setdefault((e.node_id, e.device), []).append((e.at, e.kind))
    indexes, rule = gpu_indexes(by_card)
    result = []
    for key in sorted(by_card):
        events = by_card[key]
        times = [at for at, _ in events]
        result.append(history(
            key[0], indexes[key], f"{key[0]}/{key[1]}", events,
            start=min(times) - lead_in, stop=max(times) + observe_after, step=step,
        ))
    return result, rule
