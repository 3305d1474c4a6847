"""Enflame ``efsmi -q``: cards, names and UUIDs only; no health counter is proven.

Facts (captures in ../shared/fixtures/vendors, efsmi 1.2 to 1.7, S60/S60G/L300): ``efsmi -q``
prints a banner (``Enflame System Management Interface``) and one ``DEV ID <n>`` block per
device, with indented ``key : value`` lines: ``Dev Name``, ``Dev UUID`` (e.g. ``TPUH90200803``)
and, under ``PCIe Info``, ``Domain``/``Bus``/``Dev``/``Func``. ``-q -d TEMP,MEMORY,...`` prints
the same blocks without ``Device Info``.

Why no counter: the default table's ``ECC`` column reads ``Enable``/``Disable`` (a mode, not a
count), ``Mem Ecc : enable`` likewise, and ``-q``'s ``Error Details`` lists ``DRAM HBM Error :
0`` next to ``Bus Error``, ``FW Error`` and ``User Triggered Reset`` under "Error Records" with
a reset count: nothing says whether it counts corrected errors, uncorrectable errors or events
that forced a reset. Exporting it as either ECC counter would be a guess, so every counter stays
unknown and the cards are listed in ``gpu_health_gpu_info`` only.
"""

from __future__ import annotations

import re

from gpu_health.errors import ParseError

from ..tool_output import CardReading, ParsedOutput
from .cells import is_declared_unknown, parse_index, require_unique

VENDOR = "enflame"
BANNER = "Enflame System Management Interface"
_DEVICE = re.compile(r"DEV ID\s+(\S+)\s*")
_KEY_VALUE = re.compile(r"\s+(\S.*?)\s*:\s*(.*?)\s*")


def parse_query(text: str) -> ParsedOutput:
    """Every ``DEV ID`` block of ``efsmi -q`` (or ``efsmi -q -d ...``)."""
    if BANNER not in text:
        raise ParseError(f"not efsmi output: the '{BANNER}' banner is missing")
    blocks: list[tuple[int, dict[str, str]]] = []
    for line in text.splitlines():
        device = _DEVICE.fullmatch(line)
        pair = _KEY_VALUE.fullmatch(line)
        if device is not None:
            blocks.append((parse_index(device.group(1), "efsmi DEV ID"), {}))
        elif blocks and pair is not None:
            blocks[-1][1].setdefault(pair.group(1), pair.group(2))
    if not blocks:
        # The default table and dmon print the same banner; never read them as "no cards".
        raise ParseError("efsmi printed no 'DEV ID' block (not efsmi -q output?)")
    return ParsedOutput(require_unique((_reading(i, v) for i, v in blocks), "efsmi"))


def _reading(index: int, values: dict[str, str]) -> CardReading:
    def value(key: str) -> str | None:
        text = values.get(key)
        return None if text is None or is_declared_unknown(text) else text

    parts = [value(k) for k in ("Domain", "Bus", "Dev", "Func")]
    bus = None
    if all(parts):
        domain, bus_no, dev, func = parts
        bus = f"{domain}:{bus_no}:{dev}.{func}"
    return CardReading(vendor=VENDOR, gpu=index, uuid=value("Dev UUID"),
                       model=value("Dev Name") or "", pci_bus_id=bus)
