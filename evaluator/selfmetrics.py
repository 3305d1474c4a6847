"""The evaluator's own health metrics, on a CollectorRegistry owned by the app.

Names are prefixed ``gpu_health_evaluator_``; docs/evaluator-ingest.md lists them. Later parts
(the prediction worker, the alert pusher) register their collectors on the same registry
(``EvaluatorApp.registry``) and count loop errors through :meth:`SelfMetrics.loop_error`.
Per-target series are removed when a target leaves discovery so the label set stays bounded.
They name nodes and target URLs, so they live on ``node_registry`` (the series with node data,
shown only to callers allowed to see those nodes: docs/security.md); the rest on ``registry``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from gpu_health.contract import SOURCES

PREFIX = "gpu_health_evaluator_"


class _StatementsCollector(Collector):
    """Exposes a running statement count (``Database.statements``) as a counter."""

    def __init__(self, read: Callable[[], int]) -> None:
        self._read = read

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            PREFIX + "db_statements", "SQL statements sent to DuckDB by this process."
        )
        family.add_metric([], float(self._read()))
        yield family


class SelfMetrics:
    """All ingest self-metrics. One instance per registry (names cannot be registered twice)."""

    def __init__(self, registry: CollectorRegistry,
                 node_registry: CollectorRegistry | None = None) -> None:
        self.registry = registry
        r = registry
        p = PREFIX
        self._targets(node_registry if node_registry is not None else registry, p)
        self._ingest(r, p)
        self._operations(r, p)
        for source in SOURCES:
            self.rows_written.labels(source)
        for result in ("ok", "timeout", "error"):
            self.cleanup_runs.labels(result)
        self._known_targets: dict[str, str] = {}
        self._error_reason: dict[str, str] = {}

    def _targets(self, r: CollectorRegistry, p: str) -> None:
        """Per-target scrape results."""
        self.target_up = Gauge(p + "target_up", "1 if the last scrape of the target succeeded, "
                               "else 0.", ["target", "node"], registry=r)
        self.scrape_duration = Gauge(p + "scrape_duration_seconds", "Duration of the last "
                                     "scrape of the target (fetch and parse).", ["target"],
                                     registry=r)
        self.last_error = Gauge(p + "target_last_error_info", "1 for the reason of the target's "
                                "most recent failed scrape (kept after it recovers).",
                                ["target", "reason"], registry=r)
        self.last_error_time = Gauge(p + "target_last_error_timestamp_seconds", "When the "
                                     "target's most recent failed scrape happened.", ["target"],
                                     registry=r)

    def _ingest(self, r: CollectorRegistry, p: str) -> None:
        """What the write path did with the cards (counts by reason: no node data)."""
        self.scrape_errors = Counter(p + "scrape_errors", "Failed scrapes by reason.",
                                     ["reason"], registry=r)
        self.series_ignored = Counter(p + "series_ignored", "Exporter series not used, by "
                                      "reason.", ["reason"], registry=r)
        self.values_unknown = Counter(p + "values_unknown", "Counter values read as unknown "
                                      "(None) because they were unusable, by reason.",
                                      ["reason"], registry=r)
        self.decisions = Counter(p + "write_decisions", "Write-rule decisions for scraped "
                                 "cards, by reason.", ["reason"], registry=r)
        self.rows_written = Counter(p + "rows_written", "Sample rows inserted, by source.",
                                    ["source"], registry=r)
        self.cache_hits = Counter(p + "dedup_cache_hits", "Dedup cache lookups answered from "
                                  "memory.", registry=r)
        self.cache_misses = Counter(p + "dedup_cache_misses", "Dedup cache lookups that needed "
                                    "the store.", registry=r)
        self.cache_entries = Gauge(p + "dedup_cache_entries", "Cards in the dedup cache.",
                                   registry=r)
        self.cache_evictions = Counter(p + "dedup_cache_evictions", "Dedup cache entries "
                                       "dropped, by reason (capacity, idle).", ["reason"],
                                       registry=r)

    def _operations(self, r: CollectorRegistry, p: str) -> None:
        """Cycles, discovery, retention and loop health."""
        self.cycle_duration = Histogram(p + "cycle_duration_seconds", "Duration of a whole "
                                        "scrape-and-store cycle.", registry=r,
                                        buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
        self.targets = Gauge(p + "targets", "Targets currently discovered.", registry=r)
        self.target_conflicts = Gauge(p + "target_conflicts", "Discovered endpoints ignored "
                                      "because another endpoint already claims their node.",
                                      registry=r)
        self.discovery_errors = Counter(p + "discovery_errors", "Failed target discovery "
                                        "refreshes (last good targets kept), by mechanism and "
                                        "reason.", ["mechanism", "reason"], registry=r)
        self.cleanup_runs = Counter(p + "cleanup_runs", "Retention cleanup runs, by result.",
                                    ["result"], registry=r)
        self.cleanup_deleted = Counter(p + "cleanup_rows_deleted", "Sample rows deleted by "
                                       "retention cleanup.", registry=r)
        self.loop_errors = Counter(p + "loop_errors", "Errors caught by a background loop's "
                                   "catch-all, by loop and reason.", ["loop", "reason"],
                                   registry=r)

    def watch_statements(self, read: Callable[[], int]) -> None:
        """Expose ``read()`` (the store's statement counter) as ``..._db_statements_total``."""
        self.registry.register(_StatementsCollector(read))

    def loop_error(self, loop: str, reason: str) -> None:
        self.loop_errors.labels(loop, reason).inc()

    def count(self, counter: Counter, by_reason: Mapping[str, int]) -> None:
        for reason, n in by_reason.items():
            if n:
                counter.labels(reason).inc(n)

    def target_result(self, url: str, node: str, duration: float, error_reason: str | None,
                      at_seconds: float) -> None:
        """Record one scrape of a target (``error_reason`` None means it succeeded)."""
        old_node = self._known_targets.get(url)
        if old_node is not None and old_node != node:
            self.target_up.remove(url, old_node)
        self._known_targets[url] = node
        self.target_up.labels(url, node).set(0 if error_reason else 1)
        self.scrape_duration.labels(url).set(duration)
        if error_reason is None:
            return
        self.scrape_errors.labels(error_reason).inc()
        previous = self._error_reason.get(url)
        if previous is not None and previous != error_reason:
            self.last_error.remove(url, previous)
        self._error_reason[url] = error_reason
        self.last_error.labels(url, error_reason).set(1)
        self.last_error_time.labels(url).set(at_seconds)

    def forget_targets(self, keep: Iterable[str]) -> None:
        """Remove the per-target series of every target not in ``keep``."""
        wanted = set(keep)
        for url in [u for u in self._known_targets if u not in wanted]:
            self.target_up.remove(url, self._known_targets.pop(url))
            self.scrape_duration.remove(url)
            reason = self._error_reason.pop(url, None)
            if reason is not None:
                self.last_error.remove(url, reason)
                self.last_error_time.remove(url)
