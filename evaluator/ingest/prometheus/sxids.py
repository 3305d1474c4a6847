"""NVSwitch SXid counts per node from range-query series (pure).

Only our exporter exports them (``gpu_health_nvswitch_sxid_errors_total``: dcgm-exporter and
nvidia_gpu_exporter have no SXid series), a counter per node, switch, SXid and severity. The
series' node comes from the set's node labels like a card's; its switch, SXid and severity from
the labels a scrape reads (:func:`~gpu_health.evaluator.ingest.sxid_series.sxid_series`), and
each count with the counters' value rules (an unknown value is no count: never 0). Two series
of one key disagreeing at one step (relabelled duplicates) leave that key out at that step; at
most ``MAX_SXID_SERIES`` series per node are read, as from a scrape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from gpu_health.contract import MAX_SXID_SERIES
from gpu_health.evaluator.ingest.prometheus.assembly import Assembly
from gpu_health.evaluator.ingest.prometheus.metricsets import MetricSet, counter_value, node_of
from gpu_health.evaluator.ingest.sxid_series import SxidSeries, sxid_series
from gpu_health.evaluator.model import MAX_NODE_ID


def add_sxids(acc: Assembly, ms: MetricSet, series: Iterable[Mapping[str, Any]],
              node_label: str | None) -> None:
    """Fold the SXid metric's series into ``acc.sxids`` (node -> time -> series -> count)."""
    per_node: dict[str, set[SxidSeries]] = {}
    conflicts: set[tuple[str, datetime, SxidSeries]] = set()
    for s in series:
        labels = s.get("metric", {})
        node, key = node_of(ms, labels, node_label), sxid_series(labels)
        if node is None or key is None or len(node) > MAX_NODE_ID:
            acc.dropped["sxid_series_without_identity"] += 1
            continue
        known = per_node.setdefault(node, set())
        if key not in known and len(known) >= MAX_SXID_SERIES:
            acc.dropped["sxid_series_limit"] += 1
            continue
        known.add(key)
        for ts, text in s.get("values", ()):
            value = counter_value(text)
            if value is None:
                continue
            at = datetime.fromtimestamp(float(ts), UTC)
            counts = acc.sxids.setdefault(node, {}).setdefault(at, {})
            if counts.get(key, value) != value:
                conflicts.add((node, at, key))
            counts[key] = value
    for node, at, key in conflicts:
        acc.sxids[node][at].pop(key, None)
