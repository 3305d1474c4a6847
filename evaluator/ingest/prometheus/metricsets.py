"""Which Prometheus series hold the five counters and the stored details, and whose card they
are (pure).

Three exporters' names are understood (``--metrics``), per counter ``ours`` (gpu-health-exporter)
/ ``dcgm`` (dcgm-exporter) / ``nvidia_smi`` (utkuozdemir/nvidia_gpu_exporter):

- uncorrectable ECC: ``gpu_health_ecc_uncorrected_total`` / ``DCGM_FI_DEV_ECC_DBE_AGG_TOTAL`` /
  ``nvidia_smi_ecc_errors_uncorrected_aggregate_total``;
- correctable ECC: ``gpu_health_ecc_corrected_total`` / ``DCGM_FI_DEV_ECC_SBE_AGG_TOTAL`` /
  ``nvidia_smi_ecc_errors_corrected_aggregate_total``;
- retired pages: ``gpu_health_retired_pages`` / ``DCGM_FI_DEV_RETIRED_SBE`` +
  ``DCGM_FI_DEV_RETIRED_DBE`` / ``nvidia_smi_retired_pages_single_bit_ecc_count`` +
  ``nvidia_smi_retired_pages_double_bit_count``;
- pending row remaps: ``gpu_health_remapped_rows_pending`` / ``DCGM_FI_DEV_ROW_REMAP_PENDING`` /
  ``nvidia_smi_remapped_rows_pending``;
- row-remap failure: ``gpu_health_remapped_rows_failure`` / ``DCGM_FI_DEV_ROW_REMAP_FAILURE`` /
  ``nvidia_smi_remapped_rows_failure``.

A sum is unknown when either part is (as the exporter does for retired pages).

Details beyond memory (docs/rules.md, *The weak layer*), ``ours`` only: the PCIe link width
(``gpu_health_pcie_link_width``, ``_max``), the thermal and power-brake slowdown time
(``gpu_health_clock_slowdown_seconds_total`` by ``reason``, seconds stored as whole
microseconds; the other reasons' series are not read), the fabric state (the state set
``gpu_health_fabric_state{state}``) and status (``gpu_health_fabric_status_success``), and
the PCIe replays since reset (``gpu_health_pcie_replays_total``) and the card's NVLink error
total (``gpu_health_nvlink_card_errors_total``). Of these, dcgm-exporter's default list holds
the replays only (``DCGM_FI_DEV_PCIE_REPLAY_COUNTER``, read by ``dcgm``; its
``DCGM_FI_DEV_THERMAL_VIOLATION``, commented out there, counts every thermal throttling
without the hardware/software split, and its four NVLink error totals, commented out too, split
the CRC errors into flit and data where nvidia-smi prints one count whose relation to those two
no published source states, so their sum might not be the same total); nvidia_gpu_exporter's
holds none, so ``nvidia_smi`` reads none.

Identity:

- ``ours``: ``gpu`` and ``uuid`` labels; node = the ``node`` label (the evaluator's target
  label), else the host of ``instance``;
- ``dcgm``: ``gpu``, ``UUID``; node = ``Hostname``, or ``hostname`` (dcgm-exporter renamed the
  label in #655, 2026-05; both are accepted), else ``instance``;
- ``nvidia_smi``: its per-GPU series carry only ``uuid``, without the ``GPU-`` prefix nvidia-smi
  and the other exporters print (nvidia_gpu_exporter e656cd81 strips it): the prefix is put back
  so one card has one UUID whichever exporter saw it. The index comes from
  ``nvidia_smi_gpu_info{uuid, index}`` of the same node; node = the host of ``instance``.

Each label name can be overridden (:meth:`MetricSet.relabelled`) for fleets whose relabelling
renamed them; a ``tenant`` label, when configured, files the node under that tenant.

XIDs: ``ours`` and ``nvidia_smi`` export a counter per card and XID code (``xid`` label), read
as counts. dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS`` is the *last* XID code as a gauge
(``xid_kind = "last_value"``); :mod:`gpu_health.evaluator.ingest.prometheus.xids` derives events
from its changes of value.

dcgm-exporter before 3.x printed DCGM's no-data sentinels as values (``DCGM_INT64_BLANK`` =
0x7ffffffffffffff0 = 9223372036854775792 and its relatives NOT_FOUND, NOT_SUPPORTED ... up to
9223372036854775807); as float64, which Prometheus stores, every one of them is 2**63. Such a
value is unknown, never a count, and is counted as ``no_data_sentinel``.

A value is unknown (None, never 0) when it is NaN, infinite, negative, fractional or above the
BIGINT range; two series of one card and metric with different values at one time make that
metric unknown (which one is true cannot be decided), as live ingest does; a card whose series
name two UUIDs at one time is dropped for that reading (two cards in one slot).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from gpu_health.contract import (
    COUNTER_KEYS,
    FABRIC_OK_METRIC,
    FABRIC_STATE_METRIC,
    FABRIC_STATES,
    METRIC_NAMES,
    METRIC_PREFIX,
    NVLINK_CARD_METRIC,
    PCIE_REPLAYS_METRIC,
    SLOWDOWN_METRIC,
    STORED_SLOWDOWNS,
    SXID_METRIC,
    XID_METRIC,
    CounterKey,
)
from gpu_health.evaluator.ingest.wire_values import MAX_COUNTER, MAX_GPU_INDEX, micros
from gpu_health.evaluator.model import CardKey

LIMIT_POINTS: Final = 11_000  # Prometheus: "exceeded maximum resolution of 11,000 points"
DEFAULT_MAX_POINTS: Final = 10_000  # steps per series per range query
# float(0x7ffffffffffffff0): DCGM_INT64_BLANK and every sentinel above it read as 2**63.
DCGM_INT64_SENTINEL: Final = float(0x7FFFFFFFFFFFFFF0)


@dataclass(frozen=True, slots=True)
class DetailSeries:
    """Where a stored detail comes from: a metric, only its series whose ``label`` reads
    ``value`` when a label is given, and whether it is in seconds (stored as microseconds). A
    state set (``states``) is one series per state in ``label``, 1 for the current one: the
    detail is the current state's index, known only when exactly one known state reads 1 and
    the others 0 (as a scrape reads it)."""

    metric: str
    label: str | None = None
    value: str | None = None
    seconds: bool = False
    states: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MetricSet:
    name: str
    counters: Mapping[CounterKey, tuple[str, ...]]
    node_labels: tuple[str, ...]
    gpu_label: str | None
    uuid_label: str
    info_metric: str | None = None  # gives the index when series carry none
    info_index_label: str | None = None
    xid_metric: str | None = None
    xid_kind: str = "counter"  # or "last_value": the gauge of the last XID code (dcgm)
    sxid_metric: str | None = None  # the node's NVSwitch SXid counters (ours only)
    uuid_prefix: str = ""  # put in front of a UUID that lacks it (nvidia_smi: "GPU-")
    tenant_label: str | None = None
    details: Mapping[str, DetailSeries] = field(default_factory=dict)  # detail key -> series

    def metric_names(self) -> list[str]:
        """The counters' metrics, the details' metrics, then the info metric."""
        names = [n for key in COUNTER_KEYS for n in self.counters.get(key, ())]
        names += dict.fromkeys(d.metric for d in self.details.values())
        return names + ([self.info_metric] if self.info_metric else [])

    def value_name(self, metric: str, labels: Mapping[str, str]) -> str | None:
        """What a series of ``metric`` holds: the metric's name for a counter's series, the
        detail key for a detail's; None for a series the store does not keep (another
        slowdown reason). A state set's series hold ``<key>=<state>``."""
        for key, d in self.details.items():
            if d.metric != metric:
                continue
            if d.states:
                state = labels.get(d.label or "")
                return f"{key}={state}" if state else None
            if d.label is None or labels.get(d.label) == d.value:
                return key
        return None if any(d.metric == metric for d in self.details.values()) else metric

    def value(self, name: str, text: Any) -> int | None:
        """A sample of ``name`` (:meth:`value_name`) as stored; None when unknown."""
        d = self.details.get(name)
        return seconds_value(text) if d is not None and d.seconds else counter_value(text)

    def query_names(self) -> list[str]:
        """Every metric a reader asks for: :meth:`metric_names`, then the XID and SXid ones."""
        return self.metric_names() + [m for m in (self.xid_metric, self.sxid_metric) if m]

    def relabelled(self, *, node: str | None = None, index: str | None = None,
                   uuid: str | None = None, tenant: str | None = None) -> MetricSet:
        """The same names read with other label names (None: keep the set's own)."""
        return replace(
            self, node_labels=(node,) if node else self.node_labels,
            gpu_label=index or self.gpu_label,
            info_index_label=index if index and self.info_metric else self.info_index_label,
            uuid_label=uuid or self.uuid_label, tenant_label=tenant or self.tenant_label)

    def card_uuid(self, labels: Mapping[str, str]) -> str | None:
        uuid = labels.get(self.uuid_label) or None
        if uuid is not None and self.uuid_prefix and not uuid.startswith(self.uuid_prefix):
            return self.uuid_prefix + uuid
        return uuid


OURS: Final = MetricSet("ours", {k: (METRIC_NAMES[k],) for k in COUNTER_KEYS}, ("node",),
                        "gpu", "uuid", xid_metric=XID_METRIC, sxid_metric=SXID_METRIC, details={
    "pcie_link_width": DetailSeries(METRIC_PREFIX + "pcie_link_width"),
    "pcie_link_width_max": DetailSeries(METRIC_PREFIX + "pcie_link_width_max"),
    **{key: DetailSeries(SLOWDOWN_METRIC, "reason", reason, seconds=True)
       for reason, key in STORED_SLOWDOWNS.items()},
    "fabric_state": DetailSeries(FABRIC_STATE_METRIC, "state", states=FABRIC_STATES),
    "fabric_status_success": DetailSeries(FABRIC_OK_METRIC),
    "pcie_replays": DetailSeries(PCIE_REPLAYS_METRIC),
    "nvlink_errors": DetailSeries(NVLINK_CARD_METRIC),
})
DCGM: Final = MetricSet("dcgm", {
    "ecc_uncorrected_total": ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",),
    "ecc_corrected_total": ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",),
    "retired_pages": ("DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE"),
    "remapped_rows_pending": ("DCGM_FI_DEV_ROW_REMAP_PENDING",),
    "remapped_rows_failure": ("DCGM_FI_DEV_ROW_REMAP_FAILURE",),
}, ("Hostname", "hostname"), "gpu", "UUID", xid_metric="DCGM_FI_DEV_XID_ERRORS",
    xid_kind="last_value",
    details={"pcie_replays": DetailSeries("DCGM_FI_DEV_PCIE_REPLAY_COUNTER")})
NVIDIA_SMI: Final = MetricSet("nvidia_smi", {
    "ecc_uncorrected_total": ("nvidia_smi_ecc_errors_uncorrected_aggregate_total",),
    "ecc_corrected_total": ("nvidia_smi_ecc_errors_corrected_aggregate_total",),
    "retired_pages": ("nvidia_smi_retired_pages_single_bit_ecc_count",
                      "nvidia_smi_retired_pages_double_bit_count"),
    "remapped_rows_pending": ("nvidia_smi_remapped_rows_pending",),
    "remapped_rows_failure": ("nvidia_smi_remapped_rows_failure",),
}, (), None, "uuid", "nvidia_smi_gpu_info", "index", xid_metric="nvidia_smi_xid_errors_total",
    uuid_prefix="GPU-")
METRIC_SETS: Final[dict[str, MetricSet]] = {m.name: m for m in (OURS, DCGM, NVIDIA_SMI)}


def counter_value(text: Any) -> int | None:
    """A Prometheus sample value as a counter, or None (unknown) when it cannot be one.

    Read through ``float`` on purpose, unlike the scrape path's exact integers: a query answer
    is a float64 already, and DCGM's no-data sentinels (0x7ffffffffffffff0 and up, below
    2**63 - 1 as integers) then read as 2**63, above the BIGINT range: unknown."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value) or value < 0 or value != math.floor(value) or \
            value > MAX_COUNTER:
        return None
    return int(value)


def seconds_value(text: Any) -> int | None:
    """A time in seconds as whole microseconds (the unit the store keeps), or None (unknown)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return micros(value)[0]


def selector_query(metric: str, selector: str) -> str:
    """``metric{selector}`` (the configured extra matchers), or the bare name."""
    return f"{metric}{{{selector}}}" if selector else metric


def unknown_reason(text: Any) -> str:
    """Why :func:`counter_value` gave None (the ``dropped`` counter's label)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return "unknown_value"
    return "no_data_sentinel" if value >= DCGM_INT64_SENTINEL else "unknown_value"


def instance_host(instance: str) -> str:
    """``host:port`` / ``[v6]:port`` / ``host`` -> host."""
    if instance.startswith("["):
        return instance[1:].partition("]")[0]
    host, sep, port = instance.rpartition(":")
    return host if sep and port.isdigit() and ":" not in host else instance


def node_of(ms: MetricSet, labels: Mapping[str, str], node_label: str | None = None
            ) -> str | None:
    for name in (node_label,) if node_label else ms.node_labels:
        if labels.get(name):
            return labels[name]
    return instance_host(labels["instance"]) if labels.get("instance") else None


def index_map(ms: MetricSet, info_series: Iterable[Mapping[str, Any]],
              node_label: str | None) -> dict[tuple[str, str], int]:
    """(node, uuid) -> index from the info metric's series (nvidia_smi)."""
    result: dict[tuple[str, str], int] = {}
    for s in info_series:
        labels = s.get("metric", {})
        node, uuid = node_of(ms, labels, node_label), ms.card_uuid(labels)
        index = labels.get(ms.info_index_label or "", "")
        if node and uuid and index.isdigit() and int(index) <= MAX_GPU_INDEX:
            result[(node, uuid)] = int(index)
    return result


def card_of(ms: MetricSet, labels: Mapping[str, str], node_label: str | None,
            indexes: Mapping[tuple[str, str], int]) -> tuple[CardKey, str | None] | None:
    """The card (and its UUID) a series belongs to, or None when its labels do not say."""
    node = node_of(ms, labels, node_label)
    uuid = ms.card_uuid(labels)
    if ms.gpu_label is not None:
        text = labels.get(ms.gpu_label, "")
        gpu = int(text) if text.isdigit() and int(text) <= MAX_GPU_INDEX else None
    else:
        gpu = indexes.get((node or "", uuid or ""))
    if node is None or gpu is None:
        return None
    return CardKey(node, gpu), uuid
