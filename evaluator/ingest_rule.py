"""The change-only + keepalive write rule (reference: "服务端：变化才写 + 保活行"). Pure.

A scraped card is written when it is the card's first sample, when any counter changed (unknown
to known and known to unknown included), when the slot now holds a different UUID, or when the
stored latest row is at least ``keepalive`` old, measured from *that row's* ``sampled_at`` (a
base that moved with every scrape would never let a keepalive row be written). Cards whose
counters are all unknown are never written and must be dropped before any DB access.

One case the reference does not spell out: a stored latest row stamped *after* the scrape (the
evaluator's clock stepped back). Its age is negative, so the keepalive would stay silent until
the clock caught up, and readers would see a "collection stall" that is not one. Such a card is
written (reason ``latest_in_future``); the new row then becomes the cached base.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Final

from evaluator.model import Sample

DEFAULT_KEEPALIVE: Final = timedelta(minutes=5)


class Reason(StrEnum):
    """Why a scraped card was or was not written (the ``reason`` label of a self-metric)."""

    ALL_UNKNOWN = "all_unknown"
    FIRST = "first"
    UUID_CHANGED = "uuid_changed"
    CHANGED = "changed"
    LATEST_IN_FUTURE = "latest_in_future"
    KEEPALIVE = "keepalive"
    UNCHANGED = "unchanged"


WRITE_REASONS: Final = frozenset(
    {Reason.FIRST, Reason.UUID_CHANGED, Reason.CHANGED, Reason.LATEST_IN_FUTURE, Reason.KEEPALIVE}
)


@dataclass(frozen=True, slots=True)
class Decision:
    write: bool
    reason: Reason


_SKIP_UNKNOWN: Final = Decision(False, Reason.ALL_UNKNOWN)
_SKIP_UNCHANGED: Final = Decision(False, Reason.UNCHANGED)


def decide(scraped: Sample, latest: Sample | None, keepalive: timedelta) -> Decision:
    """Write or skip ``scraped`` given the latest row confirmed in the store (None: none).

    "Now" is ``scraped.sampled_at`` (the evaluator's scrape time), so the function reads no
    clock. The keepalive fires at ``age >= keepalive``: with a 60 s scrape interval that is one
    row every 5 minutes, the reference's upper bound of 288 rows per card per day.
    """
    if scraped.counters.all_unknown():
        return _SKIP_UNKNOWN
    if latest is None:
        return Decision(True, Reason.FIRST)
    if scraped.gpu_uuid != latest.gpu_uuid:
        return Decision(True, Reason.UUID_CHANGED)
    if scraped.counters != latest.counters:
        return Decision(True, Reason.CHANGED)
    age = scraped.sampled_at - latest.sampled_at
    if age < timedelta(0):
        return Decision(True, Reason.LATEST_IN_FUTURE)
    if age >= keepalive:
        return Decision(True, Reason.KEEPALIVE)
    return _SKIP_UNCHANGED
