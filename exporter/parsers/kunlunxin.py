"""Kunlunxin ``xpu-smi`` / ``xpu_smi`` default table output.

Two layouts exist (captures in ../shared/fixtures/vendors, see SOURCES.md there):
- Third generation (``xpu-smi``, driver 5.19, P800): an nvidia-smi-like table, three lines per
  card, with a ``Volatile Uncorr. ECC`` column. That column is the only ECC number the table
  shows, so it feeds ``ecc_uncorrected_total``; "volatile" means it restarts at driver reload,
  which Prometheus handles as a counter reset. Everything else stays unknown.
- First/second generation (``xpu_smi``, driver 4.33, K200): a plain ``| DevID | PCI Addr |
  Model | ...`` table with no ECC column at all, so every counter is unknown; the cards are
  still listed for ``gpu_health_gpu_info``.
Neither table shows a UUID, so ``uuid`` is None (label "").
"""

from __future__ import annotations

import re

from gpu_health.errors import ParseError

from ..tool_output import CardReading, ParsedOutput, make_counters
from .cells import (
    PCI_ADDRESS,
    CellReader,
    is_declared_unknown,
    parse_index,
    require_unique,
    table_cells,
)

VENDOR = "kunlunxin"
ECC_HEADER = "Volatile Uncorr. ECC"

_GEN3_HEADER = re.compile(r"\s*\|\s*XPU\s+Name\b")
# "   0  P800 OAM           N/A   ": index, name (single spaces allowed), persistence mode.
_GEN3_FIRST_CELL = re.compile(r"\s*([0-9]+)\s+(\S(?:.*?\S)?)\s{2,}(\S+)\s*")


def parse_table(text: str) -> ParsedOutput:
    """Parse the table ``xpu-smi`` (gen 3) or ``xpu_smi`` (gen 1/2) prints with no arguments."""
    lines = text.splitlines()
    if any(_GEN3_HEADER.match(line) for line in lines):
        return _parse_gen3(lines)
    if any(_is_gen2_header(table_cells(line)) for line in lines):
        return _parse_gen2(lines)
    raise ParseError("not an xpu-smi table: neither the 'XPU  Name' nor the 'DevID' header found")


def _parse_gen3(lines: list[str]) -> ParsedOutput:
    reader = CellReader()
    ecc_column: int | None = None
    readings = []
    for line in lines:
        cells = table_cells(line)
        if ecc_column is None:
            ecc_column = next((i for i, c in enumerate(cells) if ECC_HEADER in c), None)
        first = _GEN3_FIRST_CELL.fullmatch(cells[0]) if len(cells) >= 2 else None
        if first is None or not PCI_ADDRESS.match(cells[1].strip()):
            continue  # header, fan/temp or L3 line of a card, or border
        gpu = parse_index(first.group(1), "xpu-smi row")
        ecc = None
        if ecc_column is not None and ecc_column < len(cells):
            ecc = reader.count(cells[ecc_column], f"xpu-smi xpu {gpu} {ECC_HEADER}")
        readings.append(
            CardReading(
                vendor=VENDOR,
                gpu=gpu,
                uuid=None,
                model=first.group(2),
                counters=make_counters({"ecc_uncorrected_total": ecc}),
                pci_bus_id=cells[1].split()[0],
            )
        )
    return ParsedOutput(require_unique(readings, "xpu-smi"), tuple(reader.anomalies))


def _is_gen2_header(cells: list[str]) -> bool:
    names = [c.strip() for c in cells]
    return "DevID" in names and "PCI Addr" in names


def _parse_gen2(lines: list[str]) -> ParsedOutput:
    """The DEVICES table only (the VIDEO and PROCESSES tables below it also have DevID)."""
    header: list[str] | None = None
    readings = []
    for line in lines:
        cells = [c.strip() for c in table_cells(line)]
        if header is None:
            header = cells if _is_gen2_header(cells) else None
            continue
        if not cells:
            if line.strip().strip("-"):
                break  # a section title such as "VIDEO": the DEVICES table is over
            continue  # a dashed border
        if len(cells) != len(header):
            raise ParseError(f"xpu_smi row has {len(cells)} cells, header has {len(header)}")
        row = dict(zip(header, cells, strict=True))
        model = row.get("Model", "")
        readings.append(
            CardReading(
                vendor=VENDOR,
                gpu=parse_index(row["DevID"], "xpu_smi row"),
                uuid=None,
                model="" if is_declared_unknown(model) else model,
                pci_bus_id=row.get("PCI Addr") or None,
            )
        )
    return ParsedOutput(require_unique(readings, "xpu_smi"))
