"""The change-only write rules for card samples and XID counts (reference: "服务端：变化才写 +
保活行"). Pure: no I/O, no clock.

Card samples (:func:`decide`):

A scraped card is written when it is the card's first sample, when any counter changed (unknown
to known and known to unknown included), when the slot now holds a different UUID, or when the
stored latest row is at least ``keepalive`` old, measured from *that row's* ``sampled_at`` (a
base that moved with every scrape would never let a keepalive row be written). Cards whose
counters are all unknown are never written and must be dropped before any DB access.

One case the reference does not spell out: a stored latest row stamped *after* the scrape (the
evaluator's clock stepped back). Its age is negative, so the keepalive would stay silent until
the clock caught up, and readers would see a "collection stall" that is not one. Such a card is
written (reason ``latest_in_future``); the new row then becomes the cached base.

XID counts (:func:`decide_xid`): the exporter exports ``gpu_health_xid_errors_total{gpu,uuid,
vendor,xid}``, kernel-log Xid lines per card and XID code counted since the exporter process
started. It RESETS to 0 when the exporter restarts, and it is only exported while the kernel log
is readable, so a 0 is a real "no line seen" (an absent series is unknown and writes nothing).
A row of ``gpu_health_xid_samples`` is written per series (node, index, source, xid) when it is
the series' first sample (``xid_first``), the slot holds a different UUID (``xid_uuid_changed``)
or the count changed, a drop (exporter restart) included (``xid_changed``). There is no
keep-alive row: the samples table already shows whether a node is scraped, and a series whose
count never changes costs one row in total instead of 288 a day. So the newest stored row of a
series can be arbitrarily old: the lookup on a cache miss is not bounded in time (the table is
tiny next to the samples), and retention keeps every series' newest row (it is the base the next
change is compared with).

NVSwitch SXid counts (:func:`decide_sxid`) follow the XID rule: a row of
``gpu_health_sxid_samples`` per series (node, source, switch, PCI id, SXid, severity) when it is
the series' first sample (``sxid_first``) or its count changed (``sxid_changed``), else
``sxid_unchanged``; no keep-alive row. A switch has no UUID.

The rules answer with a :class:`WriteDecision` (write or not, and the reason counted in
``write_decisions_total{reason}``), so one cycle algorithm (``ingest/cycle.py``) applies either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Final

from gpu_health.evaluator.model import Sample, SxidSample, XidSample


class Reason(StrEnum):
    """Why a scraped card was or was not written (the ``reason`` label of a self-metric)."""

    ALL_UNKNOWN = "all_unknown"
    FIRST = "first"
    UUID_CHANGED = "uuid_changed"
    CHANGED = "changed"
    LATEST_IN_FUTURE = "latest_in_future"
    KEEPALIVE = "keepalive"
    UNCHANGED = "unchanged"


class XidReason(StrEnum):
    """Why a scraped XID count was or was not written (``write_decisions_total{reason}``)."""

    FIRST = "xid_first"
    UUID_CHANGED = "xid_uuid_changed"
    CHANGED = "xid_changed"
    UNCHANGED = "xid_unchanged"


class SxidReason(StrEnum):
    """Why a scraped SXid count was or was not written (``write_decisions_total{reason}``)."""

    FIRST = "sxid_first"
    CHANGED = "sxid_changed"
    UNCHANGED = "sxid_unchanged"


@dataclass(frozen=True, slots=True)
class WriteDecision:
    write: bool
    reason: Reason | XidReason | SxidReason


# One shared decision per reason: a cycle at 100,000 cards decides 600,000 rows.
_DECISION: Final[dict[Reason | XidReason | SxidReason, WriteDecision]] = {
    reason: WriteDecision(reason not in (Reason.ALL_UNKNOWN, Reason.UNCHANGED,
                                         XidReason.UNCHANGED, SxidReason.UNCHANGED), reason)
    for reason in (*Reason, *XidReason, *SxidReason)}


def decide(scraped: Sample, latest: Sample | None, keepalive: timedelta) -> WriteDecision:
    """Write or skip ``scraped`` given the latest row confirmed in the store (None: none).

    "Now" is ``scraped.sampled_at`` (the evaluator's scrape time), so the function reads no
    clock. The keepalive fires at ``age >= keepalive``: with a 60 s scrape interval that is one
    row every 5 minutes, the reference's upper bound of 288 rows per card per day.
    """
    if scraped.counters.all_unknown():
        return _DECISION[Reason.ALL_UNKNOWN]
    if latest is None:
        return _DECISION[Reason.FIRST]
    if scraped.gpu_uuid != latest.gpu_uuid:
        return _DECISION[Reason.UUID_CHANGED]
    if scraped.counters != latest.counters or scraped.details != latest.details:
        return _DECISION[Reason.CHANGED]
    age = scraped.sampled_at - latest.sampled_at
    if age < timedelta(0):
        return _DECISION[Reason.LATEST_IN_FUTURE]
    if age >= keepalive:
        return _DECISION[Reason.KEEPALIVE]
    return _DECISION[Reason.UNCHANGED]


def decide_xid(scraped: XidSample, latest: XidSample | None) -> XidReason:
    """Write (any reason but UNCHANGED) or skip ``scraped`` given the latest stored row."""
    if latest is None:
        return XidReason.FIRST
    if scraped.gpu_uuid != latest.gpu_uuid:
        return XidReason.UUID_CHANGED
    if scraped.count != latest.count:
        return XidReason.CHANGED
    return XidReason.UNCHANGED


def xid_decision(scraped: XidSample, latest: XidSample | None,
                 _keepalive: timedelta | None = None) -> WriteDecision:
    """:func:`decide_xid` in the shape of :func:`decide` (XID series have no keepalive)."""
    return _DECISION[decide_xid(scraped, latest)]


def decide_sxid(scraped: SxidSample, latest: SxidSample | None) -> SxidReason:
    """Write (any reason but UNCHANGED) or skip ``scraped`` given the latest stored row."""
    if latest is None:
        return SxidReason.FIRST
    return SxidReason.CHANGED if scraped.count != latest.count else SxidReason.UNCHANGED


def sxid_decision(scraped: SxidSample, latest: SxidSample | None) -> WriteDecision:
    """:func:`decide_sxid` as a :class:`WriteDecision`."""
    return _DECISION[decide_sxid(scraped, latest)]
