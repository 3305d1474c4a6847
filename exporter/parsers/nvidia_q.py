"""``nvidia-smi -q``: the PCIe replay counters, which no ``--query-gpu`` field carries.

Facts this relies on (captures in ../shared/fixtures/nvidia, drivers 535 to 610, Linux and
Windows, one and eight cards; ours: tests/fixtures/nvidia-h200-580.159.04):
- Each card's section starts with an unindented ``GPU 00000000:19:00.0`` line (its PCI
  address) and holds ``    GPU UUID : GPU-...`` and, inside ``    PCI``, the lines
  ``        Replays Since Reset : 67`` and ``        Replay Number Rollovers : 0``. The padding
  before the colon differs by driver (535 pads to 42 columns, 590 to 55).
- ``-d`` cannot narrow the output to the PCI section: the display list of 590 has no PCIE.
- With MIG on, the MIG devices are listed before the card's UUID (590 on an H100); their lines
  name no replays.

A replay is a PCIe transaction the link layer had to resend (a NAK or a timeout: a marginal
link, riser or slot); a rollover is the replay number wrapping, after which the link retrains.
Both count since the last GPU reset or driver load. Pure: text in, frozen values out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from gpu_health.errors import ParseError

from ..tool_output import CardReading
from .cells import CellReader, pci_key

_SECTION = re.compile(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
_PAIR = re.compile(r"\s+([A-Za-z][A-Za-z ]*?)\s*:\s?(.*)")
_KEYS = {"GPU UUID": "uuid", "Replays Since Reset": "replays",
         "Replay Number Rollovers": "rollovers"}
# More sections than any node holds cards is not an nvidia-smi -q answer.
MAX_CARDS = 256


@dataclass(frozen=True, slots=True)
class PcieReplays:
    """One card's replay counters as ``-q`` printed them; None where unknown."""

    pci_bus_id: str  # the section's address as printed
    uuid: str | None
    replays: int | None
    rollovers: int | None


def parse_replays(text: str, reader: CellReader) -> tuple[PcieReplays, ...]:
    """Every card section of ``nvidia-smi -q`` with its replay counters.

    ParseError when the text has no card section (not a ``-q`` answer) or lists one address
    twice; a value that is not a count is unknown and, unless the tool declared it so, an
    anomaly in ``reader``.
    """
    sections: list[tuple[str, dict[str, str]]] = []
    for line in text.splitlines():
        head = _SECTION.fullmatch(line.rstrip())
        if head is not None:
            if len(sections) == MAX_CARDS:
                raise ParseError(f"nvidia-smi -q lists more than {MAX_CARDS} cards")
            sections.append((head.group(1), {}))
            continue
        pair = _PAIR.fullmatch(line.rstrip())
        if sections and pair is not None and pair.group(1) in _KEYS:
            sections[-1][1].setdefault(_KEYS[pair.group(1)], pair.group(2).strip())
    if not sections:
        raise ParseError("not an nvidia-smi -q answer: no 'GPU <PCI address>' section")
    keys = [pci_key(address) for address, _ in sections]
    if len(set(keys)) != len(keys):
        raise ParseError("nvidia-smi -q lists one PCI address twice")
    return tuple(_card(address, values, reader) for address, values in sections)


def _card(address: str, values: dict[str, str], reader: CellReader) -> PcieReplays:
    where = f"nvidia-smi -q gpu {address}"
    uuid = values.get("uuid")
    return PcieReplays(
        pci_bus_id=address,
        uuid=uuid if uuid and uuid.startswith("GPU-") else None,
        replays=_count(values.get("replays"), f"{where} Replays Since Reset", reader),
        rollovers=_count(values.get("rollovers"), f"{where} Replay Number Rollovers", reader),
    )


def _count(cell: str | None, where: str, reader: CellReader) -> int | None:
    return None if cell is None else reader.count(cell, where)


def with_replays(readings: tuple[CardReading, ...], cards: tuple[PcieReplays, ...]
                 ) -> tuple[CardReading, ...]:
    """The ``--query-gpu`` readings with the replay counters of the ``-q`` section that is the
    same card: the same UUID, else the same PCI address where at most one side names a UUID.
    A card no section matches keeps its counters unknown (a card swapped between the two
    commands)."""
    by_uuid = {card.uuid: card for card in cards if card.uuid}
    by_address = {pci_key(card.pci_bus_id): card for card in cards}
    out = []
    for reading in readings:
        card = by_uuid.get(reading.uuid or "")
        if card is None and reading.pci_bus_id:
            card = by_address.get(pci_key(reading.pci_bus_id))
            if card is not None and card.uuid and reading.uuid:
                card = None  # two different cards at one address: trust neither
        out.append(reading if card is None else replace(
            reading, pcie_replays=card.replays, pcie_replay_rollovers=card.rollovers))
    return tuple(out)
