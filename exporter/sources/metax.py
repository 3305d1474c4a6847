"""MetaX cards through ``mx-smi -L`` (identity, UUID) and ``mx-smi --count-ecc`` (counters).

Two processes per tick: only ``-L`` shows UUIDs, only ``--count-ecc`` shows the counts. Both
must succeed; a tick that could read the counts but not the UUIDs would export the cards under
``uuid=""`` and make the evaluator see a card swap.
"""

from __future__ import annotations

from datetime import datetime

from ..parsers import metax
from ..tool_output import ParsedOutput
from .base import VendorSource


class MetaxSource(VendorSource):
    """``mx-smi -L`` then ``mx-smi --count-ecc``."""

    vendor = metax.VENDOR
    flag = "--mx-smi"
    default_binary = "mx-smi"

    def collect(self, now: datetime) -> ParsedOutput:
        listing = self.runner.run(self.binary, ("-L",)).require_success().stdout
        ecc = self.runner.run(self.binary, ("--count-ecc",)).require_success().stdout
        return metax.parse(listing, ecc)
