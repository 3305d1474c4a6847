"""Moore Threads ``mthreads-gmi`` default table: cards, names and bus ids only.

Facts (captures in ../shared/fixtures/vendors, mthreads-gmi 2.0.0 on S80, 2.4.1 on S5000): three
lines per card; the first is ``0    MTT S5000            |00000000:18:00.0    |0% ...``. The only
ECC-related cell is ``ECC Mode`` (``On-die, EDC`` on S5000, ``N/A`` on S80): a mode, not a count.
No UUID is shown. Cards are listed in ``gpu_health_gpu_info`` with every counter unknown. The
``Processes:`` table below ends the parse.
"""

from __future__ import annotations

import re

from gpu_health.errors import ParseError

from ..tool_output import CardReading, ParsedOutput
from .cells import parse_index, require_unique

VENDOR = "mthreads"
_CARD = re.compile(r"([0-9]+)\s+(\S(?:.*?\S)?)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                   r"[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*\|.*")


def parse_table(text: str) -> ParsedOutput:
    """The card lines of the default ``mthreads-gmi`` table."""
    if "mthreads-gmi" not in text:
        raise ParseError("not an mthreads-gmi table: the 'mthreads-gmi' banner is missing")
    readings = []
    for line in text.splitlines():
        if line.startswith("Processes:"):
            break
        card = _CARD.fullmatch(line.rstrip())
        if card is not None:
            readings.append(CardReading(vendor=VENDOR, uuid=None, model=card.group(2),
                                        gpu=parse_index(card.group(1), "mthreads-gmi ID"),
                                        pci_bus_id=card.group(3)))
    return ParsedOutput(require_unique(readings, "mthreads-gmi"))
