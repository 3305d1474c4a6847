"""One chunk of range-query answers folded into per-card readings (pure): each series' card
(:func:`~gpu_health.evaluator.ingest.prometheus.metricsets.card_of`), its values as stored
(:meth:`~gpu_health.evaluator.ingest.prometheus.metricsets.MetricSet.value`), and per card and
time the five counters and the stored details, with what was dropped and why. A node's
NVSwitch SXid counts are kept beside the cards' (``sxids``: filled by :mod:`sxids`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpu_health.contract import COUNTER_KEYS, DETAIL_KEYS
from gpu_health.evaluator.ingest.prometheus.metricsets import (
    DetailSeries,
    MetricSet,
    card_of,
    unknown_reason,
)
from gpu_health.evaluator.ingest.sxid_series import SxidSeries
from gpu_health.evaluator.ingest.wire_values import state_index
from gpu_health.evaluator.model import MAX_NODE_ID, CardDetails, CardKey, Counters


@dataclass(slots=True)
class Assembly:
    """Readings of one chunk: card -> time -> (uuid, metric -> value), and what was dropped."""

    readings: dict[CardKey, dict[datetime, tuple[str | None, dict[str, int | None]]]] = \
        field(default_factory=dict)
    dropped: Counter[str] = field(default_factory=Counter)
    series: int = 0
    tenants: dict[str, str] = field(default_factory=dict)  # node -> tenant label value
    sxids: dict[str, dict[datetime, dict[SxidSeries, int]]] = field(default_factory=dict)


def add_series(acc: Assembly, ms: MetricSet, metric: str, series: Iterable[Mapping[str, Any]],
               node_label: str | None, indexes: Mapping[tuple[str, str], int]) -> None:
    """Fold one metric's range-query result into the chunk's readings."""
    for s in series:
        acc.series += 1
        labels = s.get("metric", {})
        found = card_of(ms, labels, node_label, indexes)
        if found is None:
            acc.dropped["series_without_card_identity"] += 1
            continue
        key, uuid = found
        if len(key.node_id) > MAX_NODE_ID:  # the API could never address it
            acc.dropped["node_name_too_long"] += 1
            continue
        name = ms.value_name(metric, labels)
        if name is None:
            continue  # a series the store does not keep
        if ms.tenant_label and labels.get(ms.tenant_label):
            acc.tenants[key.node_id] = labels[ms.tenant_label]
        card = acc.readings.setdefault(key, {})
        for ts, text in s.get("values", ()):
            at = datetime.fromtimestamp(float(ts), UTC)
            slot_uuid, values = card.setdefault(at, (uuid, {}))
            if slot_uuid != uuid:
                acc.dropped["uuid_conflict"] += 1
                card[at] = (slot_uuid, {**values, "__conflict__": None})
                continue
            value = ms.value(name, text)
            if value is None:
                acc.dropped[unknown_reason(text)] += 1
            if name in values and values[name] != value:
                acc.dropped["duplicate_series"] += 1
                value = None
            values[name] = value


def counters_of(ms: MetricSet, values: Mapping[str, int | None]) -> Counters:
    """The five counters from one reading's metric values (missing parts: unknown)."""
    result: list[int | None] = []
    for key in COUNTER_KEYS:  # plain loops: called once per reading of a whole history
        total: int | None = None
        for name in ms.counters.get(key, ()):
            part = values.get(name)
            if part is None:
                total = None
                break
            total = part if total is None else total + part
        result.append(total)
    return Counters(*result)


def details_of(ms: MetricSet, values: Mapping[str, int | None]) -> CardDetails:
    """The stored details from one reading's values (those the set has no series of:
    unknown)."""
    if not ms.details:
        return CardDetails()
    return CardDetails(*(_detail(key, ms.details.get(key), values) for key in DETAIL_KEYS))


def _detail(key: str, d: DetailSeries | None, values: Mapping[str, int | None]) -> int | None:
    if d is None:
        return None
    if not d.states:
        return values.get(key)
    return state_index({name.partition("=")[2]: v for name, v in values.items()
                        if name.startswith(key + "=")}, d.states)  # none or broken: unknown


def readings(acc: Assembly, ms: MetricSet) -> list[tuple[CardKey, str | None, datetime,
                                                         Counters, CardDetails]]:
    """(card, uuid, time, counters, details) in time order per card; readings of a card whose
    series disagreed on the UUID are dropped."""
    rows = []
    for key in sorted(acc.readings, key=lambda k: (k.node_id, k.gpu_index)):
        for at in sorted(acc.readings[key]):
            uuid, values = acc.readings[key][at]
            if "__conflict__" in values:
                continue
            rows.append((key, uuid, at, counters_of(ms, values), details_of(ms, values)))
    return rows
