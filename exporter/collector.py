"""The prometheus_client Collector behind ``/metrics``, ``--once`` and ``--textfile``.

Every scrape builds all families fresh from one cache snapshot (no metric objects live between
scrapes, so a card or a value that became unknown simply has no sample). Names, help texts and
labels of the five health counters come from ``gpu_health.contract``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpu_health import __version__
from gpu_health.clock import Clock
from gpu_health.contract import (
    BANK_METRIC,
    CARD_LABELS,
    COUNTER_KEYS,
    FABRIC_OK_HELP,
    FABRIC_OK_METRIC,
    FABRIC_STATE_HELP,
    FABRIC_STATE_METRIC,
    FABRIC_STATES,
    INFO_LABELS,
    INFO_METRIC,
    LINK_HELP,
    METRIC_HELP,
    METRIC_NAMES,
    METRIC_PREFIX,
    METRIC_TYPES,
    NODE_LABEL,
    NODE_METRIC,
    NVLINK_CARD_HELP,
    NVLINK_CARD_METRIC,
    NVLINK_ERRORS_HELP,
    NVLINK_ERRORS_METRIC,
    PAGES_PENDING_HELP,
    PAGES_PENDING_METRIC,
    PCIE_REPLAYS_HELP,
    PCIE_REPLAYS_METRIC,
    PCIE_ROLLOVERS_HELP,
    PCIE_ROLLOVERS_METRIC,
    RECOVERY_ACTIONS,
    RECOVERY_HELP,
    RECOVERY_METRIC,
    REMAP_HELP,
    REMAP_ROW_METRICS,
    SLOWDOWN_HELP,
    SLOWDOWN_METRIC,
)

from .cache import ReadingCache, VendorStatus
from .sources import VendorSource
from .tool_output import CardReading, nvlink_total

SELF = "gpu_health_exporter_"


class HealthCollector(Collector):
    """Builds every family fresh from one cache snapshot per scrape."""

    def __init__(
        self, cache: ReadingCache, sources: Sequence[VendorSource], clock: Clock,
        node_name: str | None = None,
    ) -> None:
        self.cache = cache
        self.sources = tuple(sources)
        self.clock = clock
        self.node_name = node_name

    def collect(self) -> Iterator[Metric]:
        snapshot = self.cache.snapshot(self.clock())
        yield from card_families(snapshot.readings)
        yield from status_families(snapshot.vendors)
        for source in self.sources:
            yield from source.extra_metrics()
        build = GaugeMetricFamily(
            SELF + "build_info", "gpu-health exporter build; always 1.", labels=["version"]
        )
        build.add_metric([__version__], 1.0)
        yield build
        if self.node_name is not None:  # not told: absent, never a guess
            node = GaugeMetricFamily(NODE_METRIC, "The node this exporter runs on "
                                     "(--node-name or $NODE_NAME); always 1.",
                                     labels=[NODE_LABEL])
            node.add_metric([self.node_name], 1.0)
            yield node


def build_registry(
    cache: ReadingCache, sources: Sequence[VendorSource], clock: Clock,
    node_name: str | None = None,
) -> CollectorRegistry:
    """A registry holding only the exporter's collector (no process/platform metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HealthCollector(cache, sources, clock, node_name))
    return registry


def card_families(readings: Iterable[CardReading]) -> list[Metric]:
    """gpu_info for every listed card, and each known counter; unknown ones get no sample."""
    readings = tuple(readings)  # read twice: the memory families, then the link's
    info = GaugeMetricFamily(
        INFO_METRIC,
        "A card the vendor tool listed (1), even when none of its health counters is known.",
        labels=list(INFO_LABELS),
    )
    families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {
        key: (CounterMetricFamily if METRIC_TYPES[key] == "counter" else GaugeMetricFamily)(
            METRIC_NAMES[key], METRIC_HELP[key], labels=list(CARD_LABELS)
        )
        for key in COUNTER_KEYS
    }
    rows = {key: GaugeMetricFamily(name, REMAP_HELP[key], labels=list(CARD_LABELS))
            for key, name in REMAP_ROW_METRICS.items()}
    banks = GaugeMetricFamily(BANK_METRIC, REMAP_HELP[BANK_METRIC],
                              labels=[*CARD_LABELS, "level"])
    recovery = GaugeMetricFamily(RECOVERY_METRIC, RECOVERY_HELP, labels=[*CARD_LABELS, "action"])
    pending = GaugeMetricFamily(PAGES_PENDING_METRIC, PAGES_PENDING_HELP, labels=list(CARD_LABELS))
    for reading in readings:
        labels = [str(reading.gpu), reading.uuid or "", reading.vendor]
        info.add_metric([*labels, reading.model], 1.0)
        for key, value in reading.counters.items():
            if value is not None:
                families[key].add_metric(labels, float(value))
        for remap_key, known in reading.remap.items():
            if known is None:
                continue
            if remap_key in rows:
                rows[remap_key].add_metric(labels, float(known))
            else:
                banks.add_metric([*labels, remap_key.removeprefix("remap_banks_")], float(known))
        _add_state_set(recovery, labels, RECOVERY_ACTIONS, reading.recovery_action)
        if reading.pages_pending is not None:
            pending.add_metric(labels, float(reading.pages_pending))
    return [info, *families.values(), *rows.values(), banks, recovery, pending,
            *link_families(readings)]


def link_families(readings: Iterable[CardReading]) -> list[Metric]:
    """The PCIe link and its replay counters, the clock slowdown time by reason, the fabric
    registration and the NVLink errors of each card whose tool lists them; an unknown value has
    no sample."""
    link = {key: GaugeMetricFamily(METRIC_PREFIX + key, help_text, labels=list(CARD_LABELS))
            for key, help_text in LINK_HELP.items()}
    slowdown = CounterMetricFamily(SLOWDOWN_METRIC, SLOWDOWN_HELP,
                                   labels=[*CARD_LABELS, "reason"])
    state = GaugeMetricFamily(FABRIC_STATE_METRIC, FABRIC_STATE_HELP,
                              labels=[*CARD_LABELS, "state"])
    ok = GaugeMetricFamily(FABRIC_OK_METRIC, FABRIC_OK_HELP, labels=list(CARD_LABELS))
    replays = CounterMetricFamily(PCIE_REPLAYS_METRIC, PCIE_REPLAYS_HELP, labels=list(CARD_LABELS))
    rollovers = CounterMetricFamily(PCIE_ROLLOVERS_METRIC, PCIE_ROLLOVERS_HELP,
                                    labels=list(CARD_LABELS))
    per_link = CounterMetricFamily(NVLINK_ERRORS_METRIC, NVLINK_ERRORS_HELP,
                                   labels=[*CARD_LABELS, "link", "counter"])
    per_card = CounterMetricFamily(NVLINK_CARD_METRIC, NVLINK_CARD_HELP, labels=list(CARD_LABELS))
    for reading in readings:
        labels = [str(reading.gpu), reading.uuid or "", reading.vendor]
        for key, value in reading.pcie.items():
            if value is not None:
                link[key].add_metric(labels, float(value))
        for reason, micros in reading.slowdown_us.items():
            slowdown.add_metric([*labels, reason], micros / 1e6)
        _add_state_set(state, labels, FABRIC_STATES, reading.fabric_state)
        if reading.fabric_ok is not None:
            ok.add_metric(labels, float(reading.fabric_ok))
        if reading.pcie_replays is not None:
            replays.add_metric(labels, float(reading.pcie_replays))
        if reading.pcie_replay_rollovers is not None:
            rollovers.add_metric(labels, float(reading.pcie_replay_rollovers))
        _add_nvlink(per_link, per_card, labels, reading)
    return [*link.values(), slowdown, state, ok, replays, rollovers, per_link, per_card]


def _add_nvlink(per_link: CounterMetricFamily, per_card: CounterMetricFamily,
                labels: list[str], reading: CardReading) -> None:
    """The card's NVLink error counters per link, and their total, where the tool listed them."""
    for (link, counter), value in sorted(reading.nvlink_errors.items()):
        if value is not None:
            per_link.add_metric([*labels, str(link), counter], float(value))
    total = nvlink_total(reading.nvlink_errors)
    if total is not None:
        per_card.add_metric(labels, float(total))


def _add_state_set(family: GaugeMetricFamily, labels: list[str], states: Sequence[str],
                   current: str | None) -> None:
    """Every state, 1 for the current one; nothing when it is unknown."""
    if current is not None:
        for name in states:
            family.add_metric([*labels, name], float(name == current))


def status_families(vendors: Iterable[VendorStatus]) -> list[Metric]:
    """Per-vendor self-metrics; a value not known yet (no tick so far) has no sample."""
    enabled = _gauge("vendor_enabled", "1 when the vendor's tool is installed, else 0.")
    success = _gauge("collect_success", "1 when the vendor's last collection succeeded, else 0.")
    duration = _gauge("collect_duration_seconds", "Duration of the vendor's last collection.")
    last_ok = _gauge(
        "last_success_timestamp_seconds", "Unix time of the vendor's last successful collection."
    )
    errors = CounterMetricFamily(
        SELF + "collect_errors_total",
        "Failed collections (and unusable values) per vendor, by reason.",
        labels=["vendor", "reason"],
    )
    for status in vendors:
        vendor = [status.vendor]
        if status.enabled is not None:
            enabled.add_metric(vendor, 1.0 if status.enabled else 0.0)
        if status.last_success is not None:
            success.add_metric(vendor, 1.0 if status.last_success else 0.0)
        if status.last_duration_s is not None:
            duration.add_metric(vendor, status.last_duration_s)
        if status.last_success_at is not None:
            last_ok.add_metric(vendor, status.last_success_at.timestamp())
        if status.enabled:
            for reason, count in sorted(status.errors.items()):
                errors.add_metric([status.vendor, reason], float(count))
    return [enabled, success, duration, last_ok, errors]


def _gauge(name: str, documentation: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(SELF + name, documentation, labels=["vendor"])
