"""XID counts per card and XID code from range-query series (pure apart from the tracker's memory).

Two shapes exist:

- a counter per card and code (``gpu_health_xid_errors_total{xid}``,
  ``nvidia_smi_xid_errors_total{xid}``): the count at each step is the value, read with the same
  value rules as the five counters;
- dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS``: a gauge holding the *last* XID code the card
  reported (0: none since the exporter started). :class:`LastXidTracker` turns it into counts
  the store's XID event definition understands, the way the exporter counts kernel-log lines:
  each card starts with the memory XIDs at 0 (a first occurrence is then seen as 0 -> 1), and a
  change of the gauge to a code c != 0 adds one to code c. The counts live in this process (an
  evaluator restart resets them to 0, which the event definition treats as an exporter restart:
  never an event). What this cannot see, said in docs/prometheus-source.md: a repeat of the same
  code (the gauge does not change), two XIDs between two steps (only the last is shown), and a
  change while the evaluator was not reading (the first value read is only a baseline).

MIG: dcgm-exporter repeats the gauge per GPU instance (``GPU_I_ID``); each series is followed
on its own, and a code that several instances of one card change to at one step counts once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from gpu_health.contract import MEMORY_XIDS
from gpu_health.evaluator.ingest.prometheus.assembly import Assembly
from gpu_health.evaluator.ingest.prometheus.metricsets import (
    MetricSet,
    card_of,
    counter_value,
)
from gpu_health.evaluator.ingest.wire_values import MAX_XID
from gpu_health.evaluator.model import CardKey

# card -> time -> (uuid, xid code -> count)
XidReadings = dict[CardKey, dict[datetime, tuple[str | None, dict[int, int]]]]


def counter_readings(acc: Assembly, ms: MetricSet, series: Iterable[Mapping[str, Any]],
                     node_label: str | None,
                     indexes: Mapping[tuple[str, str], int]) -> XidReadings:
    """Counts from counter series labelled with ``xid`` (two series of one code disagreeing at
    one step leave that code out, as an unknown value does)."""
    out: XidReadings = {}
    conflicts: set[tuple[CardKey, datetime, int]] = set()
    for s in series:
        labels = s.get("metric", {})
        found = card_of(ms, labels, node_label, indexes)
        code = labels.get("xid", "")
        if found is None or not code.isdigit() or int(code) > MAX_XID:
            acc.dropped["xid_series_without_identity"] += 1
            continue
        key, uuid = found
        for ts, text in s.get("values", ()):
            value = counter_value(text)
            if value is None:
                continue
            at = datetime.fromtimestamp(float(ts), UTC)
            _, counts = out.setdefault(key, {}).setdefault(at, (uuid, {}))
            if counts.get(int(code), value) != value:
                conflicts.add((key, at, int(code)))
            counts[int(code)] = value
    for key, at, code in conflicts:
        out[key][at][1].pop(code, None)
    return out


@dataclass(slots=True)
class LastXidTracker:
    """Per series the last gauge value seen, per card the derived counts (bounded: cards and
    series not seen for ``idle`` are forgotten by :meth:`evict`)."""

    last: dict[tuple[tuple[str, str], ...], tuple[int, datetime]] = field(default_factory=dict)
    counts: dict[CardKey, dict[int, int]] = field(default_factory=dict)
    seen: dict[CardKey, datetime] = field(default_factory=dict)

    def readings(self, acc: Assembly, ms: MetricSet, series: Iterable[Mapping[str, Any]],
                 node_label: str | None,
                 indexes: Mapping[tuple[str, str], int]) -> XidReadings:
        points: list[tuple[datetime, CardKey, str | None, tuple[tuple[str, str], ...], int]] = []
        for s in series:
            labels = s.get("metric", {})
            found = card_of(ms, labels, node_label, indexes)
            if found is None:
                acc.dropped["xid_series_without_identity"] += 1
                continue
            sid = tuple(sorted(labels.items()))
            for ts, text in s.get("values", ()):
                value = counter_value(text)
                if value is not None and value <= MAX_XID:
                    points.append((datetime.fromtimestamp(float(ts), UTC), *found, sid, value))
        points.sort(key=lambda p: p[0])
        return self._fold(points)

    def _fold(self, points: list[tuple[datetime, CardKey, str | None,
                                       tuple[tuple[str, str], ...], int]]) -> XidReadings:
        """Points in time order -> counts per card and step (a code once per card and step)."""
        events: dict[tuple[datetime, CardKey], tuple[str | None, set[int]]] = {}
        for at, key, uuid, sid, value in points:
            before = self.last.get(sid)
            self.last[sid] = (value, at)
            codes = events.setdefault((at, key), (uuid, set()))[1]
            if before is not None and before[0] != value and value != 0:
                codes.add(value)
        out: XidReadings = {}
        for (at, key), (uuid, codes) in events.items():  # insertion order: time order
            self.seen[key] = at
            counts = self.counts.setdefault(key, dict.fromkeys(MEMORY_XIDS, 0))
            for code in codes:
                counts[code] = counts.get(code, 0) + 1
            out.setdefault(key, {})[at] = (uuid, dict(counts))
        return out

    def evict(self, now: datetime, idle: timedelta) -> None:
        self.last = {k: v for k, v in self.last.items() if now - v[1] <= idle}
        gone = [k for k, at in self.seen.items() if now - at > idle]
        for key in gone:
            self.seen.pop(key)
            self.counts.pop(key, None)


def xid_readings(tracker: LastXidTracker, acc: Assembly, ms: MetricSet,
                 series: Iterable[Mapping[str, Any]], node_label: str | None,
                 indexes: Mapping[tuple[str, str], int]) -> XidReadings:
    """The XID counts of ``series`` of the set's XID metric, whichever shape it has."""
    if ms.xid_kind == "last_value":
        return tracker.readings(acc, ms, series, node_label, indexes)
    return counter_readings(acc, ms, series, node_label, indexes)
