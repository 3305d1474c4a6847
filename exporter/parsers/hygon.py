"""Hygon DCU ``hy-smi`` (and DTK 23.10 ``rocm-smi``) default table: cards only.

Facts (captures in ../shared/fixtures/vendors, DTK 23.10 to 26.04, K100-AI, BW1000): between
``System Management Interface`` and ``End of SMI Log`` one row per device under a header
``DCU     Temp     AvgPwr ...`` (``HCU`` on BW1000), the first column the device index. The
table has no name, bus id, UUID or ECC column (``Mode`` reads ``Normal``/``N/A``), so cards are
listed in ``gpu_health_gpu_info`` (``model=""``) with every counter unknown. ``hy-smi --json``
was not used: DTK 26.04 prints it with missing commas (invalid JSON); the DTK 24.04
``rocm-smi --json`` sample has no ECC fields either.
"""

from __future__ import annotations

import re

from gpu_health.errors import ParseError

from ..tool_output import CardReading, ParsedOutput
from .cells import parse_index, require_unique

VENDOR = "hygon"
_HEADER = re.compile(r"\s*(DCU|HCU)\s+Temp\s+.*")
_ROW = re.compile(r"\s*([0-9]+)\s+\S.*")


def parse_table(text: str) -> ParsedOutput:
    """The device rows of the default ``hy-smi`` table."""
    readings: list[CardReading] = []
    in_table = False
    for line in text.splitlines():
        if not in_table:
            in_table = _HEADER.fullmatch(line) is not None
            continue
        if line.startswith("="):
            break
        row = _ROW.fullmatch(line)
        if row is not None:
            readings.append(CardReading(vendor=VENDOR, uuid=None, model="",
                                        gpu=parse_index(row.group(1), "hy-smi device")))
    if not in_table:
        raise ParseError("not an hy-smi table: no 'DCU  Temp' / 'HCU  Temp' header")
    return ParsedOutput(require_unique(readings, "hy-smi"))
