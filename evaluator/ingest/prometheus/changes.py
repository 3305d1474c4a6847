"""Change points instead of every step: how a long history is read (pure apart from its state).

Reading 30 days of a 4,096-card fleet step by step means ~900 M points through JSON and Python,
nearly all of them repeating the previous step (measured: 166,000 points/s, so 1.5 hours). The
server can say where a series changes instead. For a metric ``m`` (with the selector), per
step t of a range query:

    (m unless (m == (m offset <step>)))
      or label_replace((m offset <step>) unless m, "gpu_health_gone", "1", "", "")

The first part is ``m`` where it differs from its value one step earlier or appears (no value
then); the second, marked ``gpu_health_gone="1"``, where it had a value one step earlier and has
none now (the lookback ran out or a stale marker ended it). ``m offset <step>`` at t is exactly
what a plain range query gives at t - step, so these points are exactly the changes between
consecutive steps of the plain query: the step-by-step readings can be rebuilt without loss.
The very first step of an import is read plainly (there is no "earlier" inside the import).

:class:`ChangeTracker` keeps each series' current value across chunks and, at every time one of
a card's series changes, materialises the card's reading from all its present series with the
same rules as :func:`~gpu_health.evaluator.ingest.prometheus.assembly.add_series`: two present
series of one metric disagreeing make it unknown, two UUIDs at once drop the reading, no present
series is no reading (a gap). Only the series' labels identify it (the metric name is the query's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from gpu_health.evaluator.ingest.prometheus.assembly import counters_of, details_of
from gpu_health.evaluator.ingest.prometheus.metricsets import (
    MetricSet,
    card_of,
    selector_query,
    unknown_reason,
)
from gpu_health.evaluator.model import CardDetails, CardKey, Counters

GONE: Final = "gpu_health_gone"
SeriesId = tuple[str, frozenset[tuple[str, str]]]
# None: no reading (a gap, or two UUIDs at once)
Reading = tuple[str | None, Counters, CardDetails] | None


def change_query(metric: str, selector: str, step: timedelta) -> str:
    """The change-point query of one metric (module docstring)."""
    m = selector_query(metric, selector)
    offset = f"{int(step.total_seconds() * 1000)}ms"
    return (f"({m} unless ({m} == ({m} offset {offset}))) or "
            f'label_replace(({m} offset {offset}) unless {m}, "{GONE}", "1", "", "")')


@dataclass(slots=True)
class ChangeTracker:
    """Each series' current value (text) and card, across the chunks of one import."""

    ms: MetricSet
    node_label: str | None = None
    cards: dict[CardKey, dict[SeriesId, tuple[str | None, str, str]]] = field(
        default_factory=dict)  # card -> series -> (uuid, value name, value text)
    dropped: dict[str, int] = field(default_factory=dict)
    absent: dict[str, int] = field(default_factory=dict)  # counter key -> readings without it

    def fold(self, by_metric: Mapping[str, Iterable[Mapping[str, Any]]],
             indexes: Mapping[tuple[str, str], int]
             ) -> list[tuple[CardKey, datetime, Reading]]:
        """Apply one chunk's change points; (card, time, reading) at each change, in time
        order."""
        events: dict[datetime, list[tuple[CardKey, SeriesId, tuple[str | None, str, str] |
                                          None]]] = {}
        for metric, series in by_metric.items():
            for s in series:
                labels = dict(s.get("metric", {}))
                gone = labels.pop(GONE, None) == "1"
                labels.pop("__name__", None)
                found = card_of(self.ms, labels, self.node_label, indexes)
                if found is None:
                    self._drop("series_without_card_identity")
                    continue
                key, uuid = found
                name = self.ms.value_name(metric, labels)
                if name is None:
                    continue  # a series the store does not keep
                sid = (metric, frozenset(labels.items()))
                for ts, text in s.get("values", ()):
                    at = datetime.fromtimestamp(float(ts), UTC)
                    events.setdefault(at, []).append(
                        (key, sid, None if gone else (uuid, name, str(text))))
        out: list[tuple[CardKey, datetime, Reading]] = []
        for at in sorted(events):
            touched: dict[CardKey, None] = {}
            for key, sid, value in events[at]:
                present = self.cards.setdefault(key, {})
                if value is None:
                    present.pop(sid, None)
                else:
                    present[sid] = value
                touched[key] = None
            out += [(key, at, self._reading(key)) for key in touched]
        return out

    def _reading(self, key: CardKey) -> Reading:
        present = self.cards.get(key) or {}
        if not present:
            self.cards.pop(key, None)
            return None
        uuids = {uuid for uuid, _, _ in present.values()}
        if len(uuids) > 1:
            self._drop("uuid_conflict")
            return None
        values: dict[str, int | None] = {}
        for _, name, text in present.values():
            value = self.ms.value(name, text)
            if value is None:
                self._drop(unknown_reason(text))
            if name in values and values[name] != value:
                self._drop("duplicate_series")
                value = None
            values[name] = value
        for counter, names in self.ms.counters.items():  # no series of it here: unread
            if not all(n in values for n in names):
                self.absent[counter] = self.absent.get(counter, 0) + 1
        return uuids.pop(), counters_of(self.ms, values), details_of(self.ms, values)

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
