"""Cambricon ``cnmon`` default table output: the ``Ecc-Error`` sub-column.

There is no cnmon capture in ../shared; the layout below comes from published cnmon output
(cnmon v4.20.11, v5.10.10, v5.10.13, v5.10.22, v5.10.31 on MLU370; sources in
tests/fixtures/README.md). Two lines per card; the third column of the first line holds two
sub-columns, ``Util`` and ``Ecc-Error``::

    | Card  VF  Name       Firmware |               Bus-Id | Util        Ecc-Error |
    | 0     /   MLU370-X8    v1.1.6 |         0000:13:00.0 | 0%                  0 |

v4.20.11 shows ``Inited  Driver`` where later versions show ``Bus-Id`` and left-aligns the
value; the official two-card sample prints ``N/A`` (unknown). cnmon does not say whether the
number counts correctable or uncorrectable errors (open question to the vendor); it sits where
nvidia-smi's table prints "Volatile Uncorr. ECC", so it feeds ``ecc_uncorrected_total`` (one
constant below, ``ECC_ERROR_KEY``, to change once the vendor answers). Rows whose VF column is
not ``/`` (SR-IOV virtual functions; no real output seen) are skipped: the physical card row
carries the card's count. The table shows no UUID, so ``uuid`` is None (label "").
"""

from __future__ import annotations

import re

from gpu_health.contract import CounterKey
from gpu_health.errors import ParseError

from ..tool_output import CardReading, ParsedOutput, make_counters
from .cells import PCI_ADDRESS, CellReader, parse_index, require_unique, table_cells

VENDOR = "cambricon"
ECC_HEADER = "Ecc-Error"
ECC_ERROR_KEY: CounterKey = "ecc_uncorrected_total"

_CARD = re.compile(r"[0-9]+")


class _Layout:
    """Where the interesting cells are, learned from the ``Card  VF  Name`` header row."""

    def __init__(self, header: list[str]) -> None:
        self.ecc_cell = next((i for i, c in enumerate(header) if ECC_HEADER in c.split()), None)
        names = header[self.ecc_cell].split() if self.ecc_cell is not None else []
        self.ecc_pos = names.index(ECC_HEADER) if names else 0
        self.ecc_width = len(names)
        self.bus_cell = next((i for i, c in enumerate(header) if "Bus-Id" in c.split()), None)


def parse_table(text: str) -> ParsedOutput:
    """Parse the table ``cnmon`` prints with no arguments."""
    reader = CellReader()
    layout: _Layout | None = None
    readings = []
    for line in text.splitlines():
        if "Processes:" in line:
            break  # the process table below also starts rows with a card number
        cells = table_cells(line)
        tokens = cells[0].split() if cells else []
        if layout is None:
            if tokens[:3] == ["Card", "VF", "Name"]:
                layout = _Layout(cells)
            continue
        if len(tokens) < 3 or not _CARD.fullmatch(tokens[0]) or tokens[1] != "/":
            continue  # fan/memory line, border, or a virtual-function row
        readings.append(_reading(cells, tokens, layout, reader))
    if layout is None:
        raise ParseError("not a cnmon table: the 'Card  VF  Name' header is missing")
    return ParsedOutput(require_unique(readings, "cnmon"), tuple(reader.anomalies))


def _reading(
    cells: list[str], tokens: list[str], layout: _Layout, reader: CellReader
) -> CardReading:
    gpu = parse_index(tokens[0], "cnmon row")
    model = " ".join(tokens[2:-1]) if len(tokens) > 3 else tokens[2]
    ecc = None
    if layout.ecc_cell is not None and layout.ecc_cell < len(cells):
        values = cells[layout.ecc_cell].split()
        where = f"cnmon card {gpu} {ECC_HEADER}"
        if len(values) == layout.ecc_width:
            ecc = reader.count(values[layout.ecc_pos], where)
        else:
            reader.anomalies.append(f"{where}: cell {cells[layout.ecc_cell].strip()!r} does "
                                    "not match the header's sub-columns; treated as unknown")
    bus = None
    if layout.bus_cell is not None and layout.bus_cell < len(cells):
        first = cells[layout.bus_cell].split()[:1]
        bus = first[0] if first and PCI_ADDRESS.fullmatch(first[0]) else None
    return CardReading(
        vendor=VENDOR,
        gpu=gpu,
        uuid=None,
        model=model,
        counters=make_counters({ECC_ERROR_KEY: ecc}),
        pci_bus_id=bus,
    )
