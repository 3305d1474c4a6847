"""XID counts per NVIDIA card and SXid counts per NVSwitch, shared by the follower thread
(writes) and ``/metrics`` (reads).

Counting happens when a line is read: its PCI id is looked up in the PCI -> card map built from
the NVIDIA readings (``pci_key`` spelling, so ``0000:9b:00`` == ``00000000:9B:00.0``). The map
only grows (a new card at the same address replaces the old one): a card that fell off the bus
and vanished from nvidia-smi still gets its Xid 79. A line naming no known card is counted in
``gpu_health_exporter_xid_lines_unmatched_total``, never under an invented card. Lines read
before the first NVIDIA collection finished wait (bounded) until the map exists.

Why an xid counter of 0 is NOT "unknown written as 0": the counter counts Xid lines seen since
this exporter started following the kernel log. While a log source is readable, "no line seen"
IS the observation, so the memory-related XIDs (48, 63, 64, 94, 95, the ones the evaluator
counts as faults) start at 0 per card and ``increase()`` sees their first occurrence. While no
source is readable, nothing is exported: then the count is unknown.

SXids are counted per switch as the line names it (number and PCI id; no GPU map is needed),
code and severity. The switches are not known before they log, so a series appears with its
first error (the alert counts a new series as an increase). At most ``MAX_SXID_SERIES`` series
are kept (a few switches times the codes the Fabric Manager guide lists); further ones are
dropped and counted as ``sxid_series_limit``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from gpu_health.contract import (
    MAX_SXID_SERIES,
    MEMORY_XIDS,
    SXID_LABELS,
    SXID_METRIC,
    SXID_SEVERITIES,
    XID_METRIC,
)

from .parsers.cells import pci_key
from .parsers.xid import SxidEvent, XidEvent
from .tool_output import CardReading

READABLE_METRIC = "gpu_health_exporter_xid_log_readable"
UNMATCHED_METRIC = "gpu_health_exporter_xid_lines_unmatched_total"
ERRORS_METRIC = "gpu_health_exporter_xid_follow_errors_total"
PRECREATED_XIDS: tuple[int, ...] = MEMORY_XIDS
ERROR_REASONS: tuple[str, ...] = (
    "read", "overrun", "timeout", "exit_code", "oversize", "exec", "not_found", "internal",
    "line_too_long", "sxid_series_limit")
MAX_PENDING = 10_000
VENDOR = "nvidia"

XidCard = tuple[int, str]  # a card as the Xid follower names it: (gpu index, uuid or "")
SxidSeries = tuple[int, str, int, bool]  # (switch number, its PCI id, SXid, fatal)


@dataclass(frozen=True, slots=True)
class XidSnapshot:
    """What one scrape exports, taken at one instant."""

    cards: tuple[XidCard, ...]
    counts: Mapping[tuple[XidCard, int], int]
    readable: Mapping[str, bool]
    unmatched: int
    errors: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    sxids: Mapping[SxidSeries, int] = field(default_factory=lambda: MappingProxyType({}))


class XidStore:
    """Thread-safe counts by (card, xid), the PCI map, and the follower's status."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cards: dict[str, XidCard] = {}
        self._known = False  # False until the first NVIDIA collection finished
        self._pending: deque[XidEvent] = deque(maxlen=MAX_PENDING)
        self._counts: dict[tuple[XidCard, int], int] = {}
        self._sxids: dict[SxidSeries, int] = {}
        self._readable: dict[str, bool] = {}
        self._unmatched = 0
        self._errors = dict.fromkeys(ERROR_REASONS, 0)

    def update_cards(self, readings: Sequence[CardReading] | None) -> None:
        """Map the cards' PCI ids; None = NVIDIA not collected yet (lines keep waiting)."""
        if readings is None:
            return
        with self._lock:
            for reading in readings:
                key = pci_key(reading.pci_bus_id or "")
                if reading.vendor == VENDOR and key is not None:
                    self._cards[key] = (reading.gpu, reading.uuid or "")
            self._known = True
            pending, self._pending = list(self._pending), deque(maxlen=MAX_PENDING)
            for event in pending:
                self._count(event)

    def record(self, events: Iterable[XidEvent | SxidEvent]) -> None:
        with self._lock:
            for event in events:
                if isinstance(event, SxidEvent):
                    self._count_sxid(event)
                elif self._known:
                    self._count(event)
                else:
                    self._pending.append(event)

    def _count(self, event: XidEvent) -> None:
        card = self._cards.get(event.pci_bus_id)
        if card is None:
            self._unmatched += 1
            return
        key = (card, event.xid)
        self._counts[key] = self._counts.get(key, 0) + 1

    def _count_sxid(self, event: SxidEvent) -> None:
        key = (event.switch, event.pci_bus_id, event.sxid, event.fatal)
        if key not in self._sxids and len(self._sxids) >= MAX_SXID_SERIES:
            self._errors["sxid_series_limit"] += 1
            return
        self._sxids[key] = self._sxids.get(key, 0) + 1

    def set_readable(self, statuses: Mapping[str, bool]) -> None:
        """The log sources tried in the latest poll, and whether each could be read."""
        with self._lock:
            self._readable = dict(statuses)

    def error(self, reason: str) -> None:
        with self._lock:
            self._errors[reason] = self._errors.get(reason, 0) + 1

    def snapshot(self) -> XidSnapshot:
        with self._lock:
            return XidSnapshot(
                cards=tuple(sorted(set(self._cards.values()))),
                counts=MappingProxyType(dict(self._counts)),
                readable=MappingProxyType(dict(self._readable)),
                unmatched=self._unmatched,
                errors=MappingProxyType(dict(self._errors)),
                sxids=MappingProxyType(dict(self._sxids)),
            )


class XidCollector(Collector):
    """The XID families, built fresh from one store snapshot per scrape."""

    def __init__(self, store: XidStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        yield from xid_families(self.store.snapshot())


def xid_families(snap: XidSnapshot) -> list[Metric]:
    xids = CounterMetricFamily(
        XID_METRIC,
        "NVIDIA Xid kernel-log lines per card and Xid number since the exporter started "
        "following the log. Absent while no log source is readable.",
        labels=["gpu", "uuid", "vendor", "xid"],
    )
    if any(snap.readable.values()):
        for gpu, uuid in snap.cards:
            seen = {x for (card, x) in snap.counts if card == (gpu, uuid)}
            for xid in sorted(seen | set(PRECREATED_XIDS)):
                count = snap.counts.get(((gpu, uuid), xid), 0)
                xids.add_metric([str(gpu), uuid, VENDOR, str(xid)], float(count))
    readable = GaugeMetricFamily(
        READABLE_METRIC, "1 when the kernel-log source could be read in the latest poll, else 0 "
        "(only the sources tried in that poll).", labels=["source"])
    for source, ok in sorted(snap.readable.items()):
        readable.add_metric([source], 1.0 if ok else 0.0)
    unmatched = CounterMetricFamily(
        UNMATCHED_METRIC, "Xid lines whose PCI id matched no NVIDIA card the exporter knows.")
    unmatched.add_metric([], float(snap.unmatched))
    errors = CounterMetricFamily(
        ERRORS_METRIC, "Kernel-log sources that stopped being readable (once per change), "
        "overwritten kmsg records, and follower errors, by reason.",
        labels=["reason"])
    for reason, count in sorted(snap.errors.items()):
        errors.add_metric([reason], float(count))
    return [xids, sxid_family(snap), readable, unmatched, errors]


def sxid_family(snap: XidSnapshot) -> Metric:
    sxids = CounterMetricFamily(
        SXID_METRIC,
        "NVSwitch SXid errors in the kernel log per switch, SXid number and severity (fatal, "
        "non_fatal) since the exporter started following the log; a series appears with its "
        "first error. Absent while no log source is readable.",
        labels=list(SXID_LABELS))
    if any(snap.readable.values()):
        for (switch, pci, sxid, fatal), count in sorted(snap.sxids.items()):
            sxids.add_metric([str(switch), pci, str(sxid), SXID_SEVERITIES[0 if fatal else 1]],
                             float(count))
    return sxids
