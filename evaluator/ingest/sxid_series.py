"""A node's NVSwitch SXid counts from one exposition: pure, no I/O.

``gpu_health_nvswitch_sxid_errors_total{nvswitch,pci_bus_id,sxid,severity}`` counts the SXid
errors the kernel log showed per switch, SXid and severity since the exporter started following
the log. A switch is not a card: these series carry no ``gpu`` label and fill no card; they
belong to the exposition's node. The rules:

- a count is read with the counters' value rules (NaN, negative, non-integer... is unknown,
  counted by reason, and the series is left out: never 0);
- a series whose labels do not name a switch (a whole number and a PCI id), a whole-number SXid
  and a known severity (``fatal``, ``non_fatal``) is ignored as ``bad_sxid_label``; the PCI id is
  kept in lower case, the exporter's spelling;
- two series of one key (switch, PCI id, SXid, severity) leave it out (``duplicate``);
- beyond ``MAX_SXID_SERIES`` series in one exposition (the exporter's own bound) the rest are
  ignored as ``sxid_series_limit``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Final

from gpu_health.contract import MAX_SXID_SERIES, SXID_SEVERITIES
from gpu_health.evaluator.ingest.wire_values import MAX_XID, Parsed, keep_count, whole_number

# (switch number, its PCI id, SXid, fatal): the exporter's series key, and the store's less node
SxidSeries = tuple[int, str, int, bool]

MAX_NVSWITCH: Final = 2**31 - 1  # the store's nvswitch column is INTEGER
# The kernel line's PCI id as the exporter writes it (domain:bus:device, an optional function).
_PCI: Final = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?")


def sxid_series(labels: Mapping[str, str]) -> SxidSeries | None:
    """The series an SXid sample's labels name, or None when they name none."""
    switch = whole_number(labels.get("nvswitch", ""), MAX_NVSWITCH)
    sxid = whole_number(labels.get("sxid", ""), MAX_XID)
    pci = labels.get("pci_bus_id", "")
    severity = labels.get("severity", "")
    if (switch is None or sxid is None or severity not in SXID_SEVERITIES
            or _PCI.fullmatch(pci) is None):
        return None
    return (switch, pci.lower(), sxid, severity == SXID_SEVERITIES[0])


class SxidCounts:
    """The SXid counts of one exposition as its samples arrive."""

    __slots__ = ("counts", "duplicates")

    def __init__(self) -> None:
        self.counts: dict[SxidSeries, int | None] = {}
        self.duplicates: set[SxidSeries] = set()

    def add(self, labels: Mapping[str, str], parsed: Parsed, ignored: Counter[str],
            unknown: Counter[str]) -> None:
        series = sxid_series(labels)
        if series is None:
            ignored["bad_sxid_label"] += 1
            return
        seen = series in self.counts or series in self.duplicates
        if not seen and len(self.counts) + len(self.duplicates) >= MAX_SXID_SERIES:
            ignored["sxid_series_limit"] += 1
            return
        keep_count(self.counts, self.duplicates, series, parsed, unknown)

    def finish(self) -> tuple[tuple[SxidSeries, int], ...]:
        """The known counts, sorted by series."""
        return tuple(sorted((s, v) for s, v in self.counts.items() if v is not None))
