"""``nvidia-smi nvlink -e``: the NVLink error counters of every link of every card.

Facts this relies on (published runs; tests/fixtures/README.md names them):
- Each card opens with an unindented ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`` line
  (the index nvidia-smi gives the card everywhere, its name, its UUID); one published GB300
  excerpt prints no ``(UUID: ...)`` part.
- Each link then prints one indented line per counter, ``Link 0: Replay Errors: 0``, then
  ``Recovery Errors`` and ``CRC Errors``, with a blank line between links: nine spaces before
  ``Link`` on an H100, a tab and a space on eight A100s with driver 535.161.08; 18 links on an
  H100, 12 on an A100.
- Blackwell drivers (a B300 with 595.91.07) print other counters (``Rx Errors``, ``Effective
  Errors``, ``Link recovery failed events``, FEC histogram buckets ...) and none of these
  three. No published run shows them with values, nor what a card without NVLink prints, so
  those lines are not read: such a card has no NVLink series (unknown), never zeros.

A replay is a packet the link layer resent after a CRC failure; a recovery is a link that
retrained after losing its lock; a CRC error is a flit that arrived corrupt. All count since
the driver loaded or the counters were reset (``nvidia-smi nvlink -r``). Bounded: at most
MAX_CARDS cards and the links 0 to MAX_LINKS - 1 (NVML's NVML_NVLINK_MAX_LINKS); a link beyond
is an anomaly and left out, so a card has at most 3 x 18 series. Pure: text in, frozen values
out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from gpu_health.contract import NVLINK_COUNTERS
from gpu_health.errors import ParseError

from ..tool_output import CardReading
from .cells import CellReader

_CARD = re.compile(r"GPU (\d{1,4}): (.*?)(?: \(UUID: (GPU-[0-9A-Za-z-]+)\))?")
_LINK = re.compile(r"\s+Link (\d{1,4}): ([A-Za-z][A-Za-z -]*?): (.*)")
# The counter names as printed (before Blackwell), as our ``counter`` label values.
_NAMES = dict(zip(("Replay Errors", "Recovery Errors", "CRC Errors"), NVLINK_COUNTERS,
                  strict=True))
MAX_CARDS = 256
MAX_LINKS = 18

LinkCounts = Mapping[tuple[int, str], int | None]  # (link, counter) -> count; None: unusable


@dataclass(frozen=True, slots=True)
class CardLinks:
    """One card's NVLink error counters as ``nvlink -e`` printed them."""

    gpu: int
    uuid: str | None
    counts: LinkCounts


def parse_nvlink_errors(text: str, reader: CellReader) -> tuple[CardLinks, ...]:
    """Every card ``nvidia-smi nvlink -e`` lists, with the counters it prints for it.

    ParseError when the text lists no card (not an ``nvlink -e`` answer), more than MAX_CARDS,
    or one index twice. A value that is no count is None and, unless the tool declared it
    unknown, an anomaly in ``reader``; a counter line before any card line is ignored.
    """
    cards: list[tuple[int, str | None, dict[tuple[int, str], int | None]]] = []
    for line in text.splitlines():
        head = _CARD.fullmatch(line.rstrip())
        if head is not None:
            if len(cards) == MAX_CARDS:
                raise ParseError(f"nvidia-smi nvlink -e lists more than {MAX_CARDS} cards")
            cards.append((int(head.group(1)), head.group(3), {}))
            continue
        link = _LINK.fullmatch(line.rstrip())
        if cards and link is not None and link.group(2) in _NAMES:
            _add(cards[-1], int(link.group(1)), _NAMES[link.group(2)], link.group(3), reader)
    if not cards:
        raise ParseError("not an nvidia-smi nvlink -e answer: no 'GPU <index>:' line")
    if len({gpu for gpu, _, _ in cards}) != len(cards):
        raise ParseError("nvidia-smi nvlink -e lists one GPU index twice")
    return tuple(CardLinks(gpu, uuid, MappingProxyType(counts)) for gpu, uuid, counts in cards)


def _add(card: tuple[int, str | None, dict[tuple[int, str], int | None]], link: int,
         counter: str, cell: str, reader: CellReader) -> None:
    gpu, _, counts = card
    where = f"nvidia-smi nvlink -e gpu {gpu} link {link}"
    if link >= MAX_LINKS:
        reader.anomalies.append(f"{where}: beyond the {MAX_LINKS} links a card can have; "
                                "left out")
    else:
        counts.setdefault((link, counter), reader.count(cell, f"{where} {counter}"))


def with_nvlink(readings: tuple[CardReading, ...], cards: tuple[CardLinks, ...]
                ) -> tuple[CardReading, ...]:
    """The ``--query-gpu`` readings with the NVLink counters of the same card: the same
    index, unless both sides name a UUID and they differ (a card swapped between the two
    commands keeps its counters unknown)."""
    by_gpu = {card.gpu: card for card in cards}
    out = []
    for reading in readings:
        card = by_gpu.get(reading.gpu)
        if card is not None and card.uuid and reading.uuid and card.uuid != reading.uuid:
            card = None
        out.append(reading if card is None else replace(reading, nvlink_errors=card.counts))
    return tuple(out)
