"""Hourly ECC increases from the hour-boundary samples (pure: rows in, frozen dataclasses out).

The reference's three conditions for an hour [h, h+1) to have an increase, any one failing makes
the hour unknown (null with a reason), never 0:
1. both boundaries have a *fresh* sample: the newest sample at or before the boundary is at most
   ``stall`` old (carrying an older value forward would be making data up);
2. both boundary samples come from the same card (UUID); counts of two cards cannot be subtracted;
3. the increase is not negative (a driver reset or counter wrap is unknown, not 0 and not drawn).
A boundary sample whose counter itself is unknown gives ``unknown_value``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Final

from gpu_health.evaluator.store.statistics.api_queries import Boundary

RATE_KEYS: Final[tuple[str, ...]] = ("ecc_corrected_total", "ecc_uncorrected_total")

STALE_OR_MISSING: Final = "stale_or_missing"
UUID_CHANGED: Final = "uuid_changed"
UNKNOWN_VALUE: Final = "unknown_value"
COUNTER_DECREASED: Final = "counter_decreased"


@dataclass(frozen=True, slots=True)
class Increase:
    """One counter over one hour: ``value`` None exactly when ``reason`` says why."""

    value: int | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class HourRate:
    start: datetime
    end: datetime
    increases: dict[str, Increase]


@dataclass(frozen=True, slots=True)
class Coverage:
    """Per counter: hours with a known increase, all hours, and their sum (None if none known)."""

    computable_hours: int
    total_hours: int
    sum_increase: int | None


def _fresh(b: Boundary, stall: timedelta) -> bool:
    return b.sampled_at is not None and b.at - b.sampled_at <= stall


def _increase(first: Boundary, last: Boundary, key: str, common: str | None) -> Increase:
    if common is not None:
        return Increase(None, common)
    a, b = getattr(first, key), getattr(last, key)
    if a is None or b is None:
        return Increase(None, UNKNOWN_VALUE)
    if b < a:
        return Increase(None, COUNTER_DECREASED)
    return Increase(b - a, None)


def hourly_increases(boundaries: Sequence[Boundary], *, stall: timedelta) -> tuple[HourRate, ...]:
    """One HourRate per consecutive pair of boundaries (ordered by ``at``, one hour apart)."""
    hours = []
    for first, last in pairwise(boundaries):
        common: str | None = None
        if not (_fresh(first, stall) and _fresh(last, stall)):
            common = STALE_OR_MISSING
        elif first.gpu_uuid != last.gpu_uuid:
            # Both None (a vendor without UUIDs) counts as the same card: a swap there cannot
            # be detected at all (reference, known limitation 5), and inventing one would hide
            # every hour of such cards.
            common = UUID_CHANGED
        increases = {k: _increase(first, last, k, common) for k in RATE_KEYS}
        hours.append(HourRate(first.at, last.at, increases))
    return tuple(hours)


def coverage(hours: Sequence[HourRate]) -> dict[str, Coverage]:
    result = {}
    for key in RATE_KEYS:
        values = [v for v in (h.increases[key].value for h in hours) if v is not None]
        result[key] = Coverage(len(values), len(hours), sum(values) if values else None)
    return result
