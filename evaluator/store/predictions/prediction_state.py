"""The open (pending) predictions, for the prediction-state metrics the dashboards read, and the
nodes with real samples (the demo's guard).

One statement each, whatever the number of cards. The rest of the dashboard snapshot reuses the
statistics (:mod:`gpu_health.evaluator.store.statistics.stats_queries`) and the capability matrix
(:func:`gpu_health.evaluator.store.statistics.api_queries.capabilities`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.store.db import Database


@dataclass(frozen=True, slots=True)
class OpenPrediction:
    node_id: str
    gpu_index: int
    gpu_uuid: str | None
    rule_version: str
    window_days: int
    signal: str
    layer: str
    t0: datetime
    window_end: datetime


def open_predictions(db: Database, *,
                     source: str = SOURCE_REAL) -> tuple[OpenPrediction, ...]:
    """Pending predictions of ``source``, by node and GPU (the active versions': a shadow
    version's are for its statistics only). Pending is open whatever the clock says: a t0
    "after now" is a clock that stepped back, not a prediction to hide."""
    rows = db.fetchall(
        "SELECT node_id, gpu_index, gpu_uuid, rule_version, window_days, signal, layer, t0, "
        "window_end FROM gpu_health_predictions "
        "WHERE source = $source AND status = 'pending' AND shadow IS NOT TRUE "
        "ORDER BY node_id, gpu_index, rule_version, t0",
        {"source": source},
    )
    return tuple(
        OpenPrediction(str(node), int(gpu), None if uuid is None else str(uuid), str(version),
                       int(window), str(signal), str(layer), t0,
                       end)
        for node, gpu, uuid, version, window, signal, layer, t0, end in rows
    )

