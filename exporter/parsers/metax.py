"""MetaX ``mx-smi -L`` (cards and UUIDs) and ``mx-smi --count-ecc`` (ECC counts).

Facts (captures in ../shared/fixtures/vendors, mx-smi 2.2.12, C500):
- ``-L`` lists one line per card, ``GPU#0    MXC500      0000:37:00.0   Available (UUID:
  GPU-df11...)``; cards this container cannot use read ``Not Available(MetaX Sysfs File
  Unaccessible)`` and show no UUID; indented ``SGPU#n`` lines are slices of a card, not cards.
- ``--count-ecc`` prints, per usable card, a ``GPU#0  MXC500  0000:37:00.0`` header, then
  ``ECC Errors`` with SRAM and DRAM correctable/uncorrectable counts and ``Retired Pages`` with
  ``Double Bit ECC``; values carry a trailing space.
DRAM Correctable -> ``ecc_corrected_total``, DRAM Uncorrectable -> ``ecc_uncorrected_total``:
device memory, as for the other vendors (SRAM errors are on-chip caches, not the memory whose
failure the rules predict; they are not added in). ``retired_pages`` is the sum of every
``Retired Pages`` entry (2.2.12 lists only the double-bit cause), unknown if any is unknown.
No row-remap counters exist. The JSON mode (``-j``) was not used: its ``ras_count`` holds
empty objects on the same card, no DRAM counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpu_health.errors import ParseError

from ..tool_output import CardReading, Counters, ParsedOutput, make_counters
from .cells import CellReader, require_unique

VENDOR = "metax"
_CARD = re.compile(r"GPU#([0-9]+)\s+(\S+)\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\S)"
                   r"(.*)")
_UUID = re.compile(r"\(UUID:\s*([^)\s]+)\)")
_ENTRY = re.compile(r"\s+(\S.*?)\s*:\s*(.*?)\s*")
_LOG_BANNER = "MetaX System Management Interface Log"


@dataclass(frozen=True, slots=True)
class MetaxCard:
    """One ``GPU#`` line of ``mx-smi -L``."""

    index: int
    model: str
    bus: str
    uuid: str | None


def parse_list(text: str) -> tuple[MetaxCard, ...]:
    """The cards ``mx-smi -L`` lists (slices skipped)."""
    cards = []
    for line in text.splitlines():
        match = _CARD.fullmatch(line.rstrip())  # slices are indented, so they never match
        if match is None:
            continue
        uuid = _UUID.search(match.group(4))
        cards.append(MetaxCard(int(match.group(1)), match.group(2), match.group(3),
                               uuid.group(1) if uuid else None))
    if not cards and "mx-smi" not in text:
        raise ParseError("not mx-smi -L output: no 'GPU#' line and no mx-smi banner")
    return tuple(cards)


def parse(list_text: str, ecc_text: str) -> ParsedOutput:
    """Cards from ``mx-smi -L``, counters from ``mx-smi --count-ecc`` (matched by index).

    A card ``-L`` lists but ``--count-ecc`` does not (not usable here) is listed with every
    counter unknown.
    """
    reader = CellReader()
    counters = {card.index: (card, values) for card, values in _ecc_blocks(ecc_text, reader)}
    readings = []
    for card in parse_list(list_text):
        values = counters.pop(card.index, (card, make_counters()))[1]
        readings.append(_reading(card, values))
    # A card --count-ecc reports that -L did not list (not seen in real output): still a card.
    readings += [_reading(card, values) for card, values in counters.values()]
    return ParsedOutput(require_unique(readings, "mx-smi"), tuple(reader.anomalies))


def _reading(card: MetaxCard, counters: Counters) -> CardReading:
    return CardReading(vendor=VENDOR, gpu=card.index, uuid=card.uuid, model=card.model,
                       counters=counters, pci_bus_id=card.bus)


def _ecc_blocks(text: str, reader: CellReader) -> list[tuple[MetaxCard, Counters]]:
    if _LOG_BANNER not in text:
        raise ParseError(f"not mx-smi --count-ecc output: no '{_LOG_BANNER}' banner")
    blocks: list[tuple[MetaxCard, dict[str, dict[str, str]]]] = []
    section = ""
    for line in text.splitlines():
        card = _CARD.fullmatch(line.rstrip())
        entry = _ENTRY.fullmatch(line) if line.startswith("        ") else None
        if card is not None:
            blocks.append((MetaxCard(int(card.group(1)), card.group(2), card.group(3), None),
                           {}))
        elif blocks and entry is not None:
            blocks[-1][1].setdefault(section, {})[entry.group(1)] = entry.group(2)
        elif blocks and line.startswith("    ") and line.strip():
            section = line.strip()  # "ECC Errors", "Retired Pages"
    return [(card, _counters(card.index, sections, reader)) for card, sections in blocks]


def _counters(
    index: int, sections: Mapping[str, Mapping[str, str]], reader: CellReader
) -> Counters:
    where = f"mx-smi --count-ecc GPU#{index}"
    ecc = sections.get("ECC Errors", {})

    def count(name: str) -> int | None:
        value = ecc.get(name)
        return None if value is None else reader.count(value, f"{where} {name}")

    retired = sections.get("Retired Pages")
    pages = [reader.count(v, f"{where} Retired Pages {k}") for k, v in (retired or {}).items()]
    total = None if not pages or None in pages else sum(p for p in pages if p is not None)
    return make_counters({
        "ecc_corrected_total": count("DRAM Correctable"),
        "ecc_uncorrected_total": count("DRAM Uncorrectable"),
        "retired_pages": total,
    })
