"""Error-event CSV files -> events, one at a time (pure: lines in, data out).

One CSV row is one error event of one card: key columns naming the card, a time, and a type.
Types map to ``correctable`` or ``uncorrectable``; every other type is refused unless listed as
ignored (an unmapped ``XID`` column silently dropped would shrink the fault count). Times are Unix
seconds or ISO 8601 with a zone in its RFC 3339 form (:mod:`gpu_health.timestamps`); a
zone-less time is refused (its offset is a guess). A card is named by the node columns joined
with ``/`` and the device column.

A file is read twice and never held: :func:`parse_events` checks every row and counts (types,
events per card) before anything is written; :func:`iter_events` then hands the events out one
at a time (:mod:`gpu_health.evaluator.backtest.events_import`). Memory grows with the cards and
types a file names (each bounded), not with its rows. The histories the events become are
:mod:`gpu_health.evaluator.backtest.card_history`.

The Calchas preset reads the public HBM dataset of Wu et al. (USENIX ATC '24): card = Datacenter
+ Server + Name, ``CE`` correctable, ``UER``/``UEO`` uncorrectable.
"""

from __future__ import annotations

import contextlib
import csv
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

from gpu_health.errors import ConfigError
from gpu_health.timestamps import parse_timestamp

Kind = Literal["corrected", "uncorrected"]
CardName = tuple[str, str]  # (node_id, device) as the file names a card
MAX_LISTED: Final = 20
MAX_TYPES: Final = 1000  # distinct event-type values: more means a wrong type column
MAX_CARDS: Final = 1_000_000  # distinct cards: more means a wrong key column (or a hostile file)
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
    """What a first read of a file found. No event is kept (a file of millions of rows would
    hold gigabytes): :func:`iter_events` reads them again, one at a time."""

    rows: int
    events: int
    by_type: dict[str, int]  # every type seen, with its count (ignored ones included)
    ignored: int
    cards: dict[CardName, int]  # events per (node_id, device)


@dataclass(slots=True)
class _Tally:
    """What one read of the rows has counted so far."""

    rows: int = 0
    types: Counter[str] = field(default_factory=Counter)
    problems: _Problems = field(default_factory=_Problems)


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


def _events(lines: Iterable[str], columns: EventColumns, origin: str,
            tally: _Tally) -> Iterator[Event]:
    """The file's events, one at a time, counting rows, types and problems into ``tally``.
    Missing columns, a field above the csv module's limit, a NUL byte or bytes that are not
    UTF-8 end the read with one line naming where."""
    reader = csv.DictReader(lines)
    with _unreadable_as_config_error(reader, origin):
        header = reader.fieldnames or []
    wanted = (*columns.node, columns.gpu, columns.time, columns.type)
    missing = [c for c in dict.fromkeys(wanted) if c not in header]
    if missing:
        raise ConfigError(f"{origin}: missing column(s) {', '.join(missing)} (header: "
                          f"{', '.join(_shown(h) for h in header[:50]) or 'none'})")
    types = tally.types
    with _unreadable_as_config_error(reader, origin):
        for rows, row in enumerate(reader, start=1):
            kind = (row.get(columns.type) or "").strip()
            if kind not in types and len(types) >= MAX_TYPES:
                raise ConfigError(f"{origin}: line {rows + 1}: more than {MAX_TYPES} distinct "
                                  f"values in the type column {columns.type!r}: is it the "
                                  "right column?")
            types[kind] += 1
            tally.rows = rows
            event = _row(row, rows + 1, columns, tally.problems)  # the header is line 1
            if event is not None:
                yield event


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
    """Read every row once, keeping counts only; ConfigError lists every problem (missing
    columns, bad times, unmapped types) instead of dropping rows."""
    tally = _Tally()
    cards: Counter[CardName] = Counter()
    for event in _events(lines, columns, origin, tally):
        card = (event.node_id, event.device)
        if card not in cards and len(cards) >= MAX_CARDS:
            raise ConfigError(f"{origin}: line {tally.rows + 1}: more than {MAX_CARDS} distinct "
                              f"cards ({', '.join((*columns.node, columns.gpu))}): are they the "
                              "right columns?")
        cards[card] += 1
    problems = tally.problems
    mapped = columns.correctable | columns.uncorrectable | columns.ignore
    unmapped = sorted(t for t in tally.types if t not in mapped)
    if unmapped:
        problems.insert(0, f"event type(s) {', '.join(_shown(t) for t in unmapped[:20])} are "
                           "neither correctable, uncorrectable nor ignored: map or ignore them")
    if not tally.rows:
        problems.append("no event rows")
    if problems:
        shown = list(problems)
        if problems.more:
            shown.append(f"... and {problems.more} more problem(s)")
        raise ConfigError([f"{origin}: {p}" for p in shown])
    ignored = sum(n for t, n in tally.types.items() if t in columns.ignore)
    return EventFile(tally.rows, sum(cards.values()), dict(tally.types), ignored, dict(cards))


def iter_events(lines: Iterable[str], columns: EventColumns, origin: str,
                file: EventFile) -> Iterator[Event]:
    """The events of a file :func:`parse_events` has read, one at a time; ConfigError when the
    file is no longer what that read found (it changed in between)."""
    tally = _Tally()
    yield from _events(lines, columns, origin, tally)
    if tally.problems or tally.rows != file.rows or dict(tally.types) != file.by_type:
        raise ConfigError(f"{origin}: changed while it was read ({file.rows} rows at first, "
                          f"{tally.rows} now): import a file nothing is writing to")
