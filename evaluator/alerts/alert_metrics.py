"""Self-metrics of the alert loop (names in docs/alerting.md).

Open-alert counts and ages are computed when /metrics is scraped, from the list of open alerts
the last successful sync read from the store, so an age is never stale by a tick. Before the
first sync the open counts are unknown and absent (never 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpu_health.clock import Clock

PREFIX = "gpu_health_evaluator_"
PUSH_RESULTS = ("ok", "timeout", "connect", "http_4xx", "http_5xx", "error")


class _OpenAlerts(Collector):
    def __init__(self, metrics: AlertMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        m = self._metrics
        if m.open_alerts is None:
            return
        now = m.clock()
        ages = [(node, max((now - opened).total_seconds(), 0.0)) for node, opened in m.open_alerts]
        backlog = m.backlog_after.total_seconds()
        count = GaugeMetricFamily(PREFIX + "alerts_open", "GPU_FAULT_PREDICTED alerts open now "
                                  "(absent until the first sync with the store).")
        count.add_metric([], len(ages))
        late = GaugeMetricFamily(
            PREFIX + "alerts_open_backlog", "Open GPU_FAULT_PREDICTED alerts older than "
            f"alerting.backlog_after ({backlog:g}s): an operations backlog.")
        late.add_metric([], sum(1 for _, age in ages if age > backlog))
        age = GaugeMetricFamily(PREFIX + "alert_open_age_seconds",
                                "Seconds since the node's open GPU_FAULT_PREDICTED alert opened.",
                                labels=["node"])
        for node, seconds in ages:
            age.add_metric([node], seconds)
        yield from (count, late, age)


class AlertMetrics:
    """Registered once per registry."""

    def __init__(self, registry: CollectorRegistry, clock: Clock, backlog_after: timedelta,
                 alertmanagers: Sequence[str] = (),
                 node_registry: CollectorRegistry | None = None) -> None:
        """``node_registry`` takes the open-alert series (they name nodes, and their counts
        are over every tenant's nodes: docs/security.md); default ``registry``."""
        self.clock = clock
        self.backlog_after = backlog_after
        self.open_alerts: tuple[tuple[str, datetime], ...] | None = None
        self.pushes = Counter(PREFIX + "alert_pushes", "Alert pushes to an Alertmanager, by "
                              "result (ok, timeout, connect, http_4xx, http_5xx, error).",
                              ["alertmanager", "result"], registry=registry)
        self.am_up = Gauge(PREFIX + "alertmanager_up", "1 if the last push to the Alertmanager "
                           "was accepted, else 0 (absent before the first push).",
                           ["alertmanager"], registry=registry)
        self.am_last_success = Gauge(
            PREFIX + "alertmanager_last_success_timestamp_seconds",
            "Unix time of the last push the Alertmanager accepted.", ["alertmanager"],
            registry=registry)
        self.opened = Counter(PREFIX + "alerts_opened", "GPU_FAULT_PREDICTED alerts opened by "
                              "this instance.", registry=registry)
        self.closed = Counter(PREFIX + "alerts_closed", "GPU_FAULT_PREDICTED alerts closed, by "
                              "who closed them (operator, node_removed).", ["by"],
                              registry=registry)
        for am in alertmanagers:
            for result in PUSH_RESULTS:
                self.pushes.labels(am, result)
        for by in ("operator", "node_removed"):
            self.closed.labels(by)
        (node_registry if node_registry is not None else registry).register(_OpenAlerts(self))

    def set_open(self, alerts: Iterable[tuple[str, datetime]]) -> None:
        """The open alerts as (node, opened_at), from the latest sync."""
        self.open_alerts = tuple(alerts)

    def push_result(self, alertmanager: str, result: str, at: datetime) -> None:
        self.pushes.labels(alertmanager, result).inc()
        self.am_up.labels(alertmanager).set(1 if result == "ok" else 0)
        if result == "ok":
            self.am_last_success.labels(alertmanager).set(at.timestamp())
