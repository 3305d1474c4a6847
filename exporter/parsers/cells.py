"""Cell-level rules shared by every vendor parser: what is a count, a flag, or unknown.

The one rule that matters: anything that is not a plain non-negative integer (or a Yes/No flag
where a flag belongs) is unknown, never 0. Cells the tools print on purpose for "no value"
(``[N/A]``, ``N/A``, ``[Not Supported]``, ``[Unknown Error]``, empty, ...) are unknown quietly;
anything else (a negative number, text, mojibake) is unknown AND recorded as an anomaly so the
exporter can count it in a self-metric.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpu_health.errors import ParseError

from ..tool_output import CardReading

_COUNT = re.compile(r"[0-9]+")
# The text exposition format carries float64 values: above 2^53 not every integer has one, so
# such a count would be exported rounded (1e+26) as if exact. It is unknown instead, and said.
MAX_EXACT_COUNT = 2**53
# domain:bus:device.function as the tools print it (4-digit domain in xpu_smi 4.x and cnmon,
# 8-digit in nvidia-smi and xpu-smi 5.x).
PCI_ADDRESS = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]")
_PCI_PARTS = re.compile(
    r"([0-9A-Fa-f]{1,8}):([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})(?:\.[0-9A-Fa-f])?")
# nvidia-smi prints every "no value" reason in brackets ([N/A], [Not Supported], [Unknown Error],
# [Insufficient Permissions], [Function Not Found], [Requested functionality has been
# deprecated], seen in drivers 442..610); xpu-smi and cnmon print a bare N/A.
_UNKNOWN_WORDS = frozenset({"", "N/A"})
_FLAGS = {"Yes": 1, "No": 0}


def is_declared_unknown(cell: str) -> bool:
    """True for the spellings a tool uses on purpose to say "no value here"."""
    cell = cell.strip()
    return cell in _UNKNOWN_WORDS or (len(cell) >= 2 and cell[0] == "[" and cell[-1] == "]")


class CellReader:
    """Converts the cells of ONE tool output and collects its anomalies.

    ``unknown_words`` adds a tool's own "no value" spellings to the common ones (npu-smi prints
    ``NA`` and ``-``; xpu-smi's XML prints ``Invalid Argument``).
    """

    def __init__(self, unknown_words: frozenset[str] = frozenset()) -> None:
        self.anomalies: list[str] = []
        self.unknown_words = unknown_words

    def count(self, cell: str, where: str) -> int | None:
        """A non-negative integer, or None (unknown)."""
        text = cell.strip()
        if _COUNT.fullmatch(text):
            value = int(text)
            if value <= MAX_EXACT_COUNT:
                return value
            self.anomalies.append(f"{where}: count {text[:40]} is above 2^53 and cannot be "
                                  "exported exactly; treated as unknown")
            return None
        self._unknown(text, where)
        return None

    def flag(self, cell: str, where: str) -> int | None:
        """``Yes`` -> 1, ``No`` -> 0, anything else None (unknown)."""
        text = cell.strip()
        if text in _FLAGS:
            return _FLAGS[text]
        self._unknown(text, where)
        return None

    def unusable(self, text: str, where: str) -> None:
        """Record a cell no rule could read (a documented unknown spelling is not one)."""
        self._unknown(text.strip(), where)

    def _unknown(self, text: str, where: str) -> None:
        if not is_declared_unknown(text) and text not in self.unknown_words:
            self.anomalies.append(f"{where}: unusable value {text[:40]!r} treated as unknown")


def parse_index(cell: str, where: str) -> int:
    """A card index. Without a valid one a card cannot be labelled, so the output is rejected."""
    text = cell.strip()
    if not _COUNT.fullmatch(text):
        raise ParseError(f"{where}: card index {text[:40]!r} is not a non-negative integer")
    return int(text)


def pci_key(address: str) -> str | None:
    """``domain:bus:device`` in one spelling: lower case, 4-digit domain, no function.

    nvidia-smi prints ``00000000:9B:00.0``, the kernel's Xid lines ``0000:9b:00`` (no function,
    as the driver's format string has none); both become ``0000:9b:00``. None if not an address.
    """
    match = _PCI_PARTS.fullmatch(address.strip())
    if match is None:
        return None
    domain, bus, device = (int(part, 16) for part in match.groups())
    return f"{domain:04x}:{bus:02x}:{device:02x}"


def table_cells(line: str) -> list[str]:
    """The '|'-separated cells of a box-drawn table line ([] when the line is not a row)."""
    stripped = line.strip()
    if len(stripped) < 2 or stripped[0] != "|" or stripped[-1] != "|":
        return []
    return stripped[1:-1].split("|")


def require_unique(readings: Iterable[CardReading], tool: str) -> tuple[CardReading, ...]:
    """The readings, unless two cards claim the same index (two series with one label set)."""
    seen: set[int] = set()
    out = []
    for reading in readings:
        if reading.gpu in seen:
            raise ParseError(f"{tool} listed card index {reading.gpu} twice")
        seen.add(reading.gpu)
        out.append(reading)
    return tuple(out)
