"""XID counter samples: plain data and the change-only write rule (pure, no I/O, no clock).

The exporter exports ``gpu_health_xid_errors_total{gpu,uuid,vendor,xid}``: kernel-log Xid lines
per card and XID code counted since the exporter process started. It RESETS to 0 when the
exporter restarts, and it is only exported while the kernel log is readable, so a 0 is a real
"no line seen" (an absent series is unknown and writes nothing).

Rows of ``gpu_health_xid_samples`` are written per series (node, index, source, xid) when:

- it is the series' first sample (``xid_first``);
- the card slot now holds a different UUID (``xid_uuid_changed``);
- the count changed, a drop (exporter restart) included (``xid_changed``).

There is no keep-alive row: the samples table already shows whether a node is scraped, and a
series whose count never changes costs one row in total instead of 288 a day. So the newest
stored row of a series can be arbitrarily old: the lookup on a cache miss is not bounded in time
(the table is tiny next to the samples), and retention keeps every series' newest row (it is the
base the next change is compared with).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from evaluator.model import CardKey

XID_LABEL: Final = "xid"
MAX_XID: Final = 2**31 - 1  # the store's xid column is INTEGER


@dataclass(frozen=True, slots=True)
class XidKey:
    """One XID series of a card slot (the UUID is data, as for samples: a swap is a change)."""

    node_id: str
    gpu_index: int
    source: str
    xid: int

    @property
    def card(self) -> CardKey:
        return CardKey(self.node_id, self.gpu_index, self.source)


@dataclass(frozen=True, slots=True)
class XidSample:
    """One stored (or to-be-stored) row of ``gpu_health_xid_samples``; aware-UTC time."""

    key: XidKey
    gpu_uuid: str | None
    sampled_at: datetime
    count: int


class XidReason(StrEnum):
    """Why a scraped XID count was or was not written (``write_decisions_total{reason}``)."""

    FIRST = "xid_first"
    UUID_CHANGED = "xid_uuid_changed"
    CHANGED = "xid_changed"
    UNCHANGED = "xid_unchanged"


def decide_xid(scraped: XidSample, latest: XidSample | None) -> XidReason:
    """Write (any reason but UNCHANGED) or skip ``scraped`` given the latest stored row."""
    if latest is None:
        return XidReason.FIRST
    if scraped.gpu_uuid != latest.gpu_uuid:
        return XidReason.UUID_CHANGED
    if scraped.count != latest.count:
        return XidReason.CHANGED
    return XidReason.UNCHANGED
