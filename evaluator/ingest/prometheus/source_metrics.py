"""Self-metrics of the Prometheus source (``gpu_health_evaluator_source_*``, no node labels).

What an operator needs to trust the source: how long its queries take, how much it reads, how
far behind the data is, and why a cycle failed (``errors_total{reason}``, the reasons of
:mod:`gpu_health.evaluator.ingest.prometheus.query`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

P: Final = "gpu_health_evaluator_source_"
REASONS: Final = ("unreachable", "timeout", "http_error", "bad_response", "too_large",
                  "too_many_series", "store")


class SourceMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.query_duration = Histogram(
            P + "query_duration_seconds", "Duration of each range query to the Prometheus "
            "source.", registry=r, buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
        self.points = Counter(P + "points_read", "Points (series x steps) read from the "
                              "Prometheus source.", registry=r)
        self.series = Gauge(P + "series", "Series read by the last successful cycle.",
                            registry=r)
        self.cards = Gauge(P + "cards", "Cards with a reading at the last step read.",
                           registry=r)
        self.steps = Counter(P + "steps_read", "Steps read and written.", registry=r)
        self.skipped = Counter(P + "steps_skipped", "Steps given up after an outage longer "
                               "than max_catchup (a gap in the store).", registry=r)
        self.errors = Counter(P + "errors", "Failed source cycles, by reason.", ["reason"],
                              registry=r)
        self.dropped = Counter(P + "values_dropped", "Series or values not used, by reason.",
                               ["reason"], registry=r)
        self.last_success = Gauge(P + "last_success_timestamp_seconds", "When a cycle last "
                                  "succeeded.", registry=r)
        self.last_step = Gauge(P + "last_step_timestamp_seconds", "The newest step read (the "
                               "data's own time).", registry=r)
        for reason in REASONS:
            self.errors.labels(reason)

    def count_dropped(self, dropped: Mapping[str, int]) -> None:
        for reason, n in dropped.items():
            if n:
                self.dropped.labels(reason).inc(n)
