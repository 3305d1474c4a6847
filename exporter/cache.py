"""The in-process cache between the collection loop and ``/metrics``.

The loop writes each vendor's readings with the tick's timestamp; every scrape takes a
snapshot with a freshness cutoff. A reading older than ``stale_after`` (180 s, three ticks, by
default) is left out entirely: if the loop is stuck or the tool was uninstalled, re-exporting the
last value would claim "just measured, all fine". A failed tick does not wipe the cache; the
previous readings age out on their own, which tolerates one or two bad ticks without a gap.

Per-vendor status for the self-metrics lives here too, so a scrape sees readings and status
from the same moment. Thread-safe: the loop writes, HTTP threads read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import MappingProxyType

from .tool_output import CardReading, ParsedOutput


@dataclass(frozen=True, slots=True)
class VendorStatus:
    """What the self-metrics say about one vendor. ``None`` means not known yet."""

    vendor: str
    enabled: bool | None = None  # None until the tool has been looked for once
    last_success: bool | None = None
    last_duration_s: float | None = None
    last_success_at: datetime | None = None
    errors: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Fresh readings and every vendor's status, taken at one instant."""

    readings: tuple[CardReading, ...]
    vendors: tuple[VendorStatus, ...]


@dataclass(slots=True)
class _Entry:
    status: VendorStatus
    readings: tuple[CardReading, ...] = ()
    at: datetime | None = None


class ReadingCache:
    """Readings per vendor with the time they were read, plus each vendor's status."""

    def __init__(self, stale_after: timedelta) -> None:
        self.stale_after = stale_after
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    def register(self, vendor: str, reasons: Iterable[str]) -> None:
        """Start tracking ``vendor`` with every error reason it can produce at 0."""
        with self._lock:
            errors = MappingProxyType(dict.fromkeys(reasons, 0))
            self._entries[vendor] = _Entry(VendorStatus(vendor, errors=errors))

    def record_success(
        self, vendor: str, output: ParsedOutput, at: datetime, duration_s: float
    ) -> None:
        with self._lock:
            entry = self._entries[vendor]
            errors = _bump(entry.status.errors, "invalid_value", len(output.anomalies))
            for failure in output.failures:
                errors = _bump(errors, failure.reason, 1)
            entry.status = replace(
                entry.status,
                enabled=True,
                last_success=True,
                last_duration_s=duration_s,
                last_success_at=at,
                errors=errors,
            )
            entry.readings, entry.at = output.readings, at

    def record_failure(self, vendor: str, reason: str, duration_s: float) -> None:
        """A failed tick: counted, readings kept until they go stale."""
        with self._lock:
            entry = self._entries[vendor]
            entry.status = replace(
                entry.status,
                enabled=True,
                last_success=False,
                last_duration_s=duration_s,
                errors=_bump(entry.status.errors, reason, 1),
            )

    def was_enabled(self, vendor: str) -> bool:
        """True once the vendor's tool has been found at least once."""
        with self._lock:
            return self._entries[vendor].status.enabled is True

    def mark_absent(self, vendor: str) -> bool:
        """The tool was never found: vendor disabled. True the first time (to log it once)."""
        with self._lock:
            entry = self._entries[vendor]
            first = entry.status.enabled is None
            if first:
                entry.status = replace(entry.status, enabled=False)
            return first

    def collected(self, vendor: str, now: datetime) -> tuple[CardReading, ...] | None:
        """The vendor's fresh readings; None until one of its ticks has finished.

        A vendor whose tool is absent, or whose ticks so far all failed, has ``()``.
        """
        with self._lock:
            entry = self._entries.get(vendor)
            if entry is None or entry.status.enabled is None:  # no tick has finished yet
                return None
            fresh = entry.at is not None and now - entry.at <= self.stale_after
            return entry.readings if fresh else ()

    def snapshot(self, now: datetime) -> Snapshot:
        with self._lock:
            entries = [(e.status, e.readings, e.at) for e in self._entries.values()]
        readings = tuple(
            reading
            for _, batch, at in entries
            if at is not None and now - at <= self.stale_after
            for reading in batch
        )
        return Snapshot(readings=readings, vendors=tuple(status for status, _, _ in entries))


def _bump(errors: Mapping[str, int], reason: str, by: int) -> Mapping[str, int]:
    """A new read-only mapping (statuses are shared with snapshots, so never mutated)."""
    if not by:
        return errors
    out = dict(errors)
    out[reason] = out.get(reason, 0) + by
    return MappingProxyType(out)
