"""Plain data shared across the evaluator: card keys, counter tuples, samples, XID samples, the
prediction statuses.

Frozen dataclasses and named tuples only; no I/O. Counter values are ``int | None`` where
``None`` means unknown (never 0). The order of fields in :class:`Counters` is
``gpu_health.contract.COUNTER_KEYS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, NamedTuple

from gpu_health.contract import DETAIL_KEYS, SOURCE_REAL

# The longest node id the evaluator accepts (a DNS name's limit): every node it stores must be
# addressable by the API, whose query values stop at 256 characters. A longer one is refused
# where it enters (config, discovery, the Prometheus source), never stored.
MAX_NODE_ID: Final = 253

# A prediction's status, the one list every layer uses (the store's CHECK, the API's filter and
# enum, the statistics' counts): pending until its window is decided, then one of RESOLVED.
ResolvedStatus = Literal["hit", "miss", "voided"]
PredictionStatus = Literal["pending", ResolvedStatus]
STATUSES: Final[tuple[PredictionStatus, ...]] = ("pending", "hit", "miss", "voided")
RESOLVED: Final[tuple[ResolvedStatus, ...]] = ("hit", "miss", "voided")


# The plain shapes of a card inside one data source, for the paths that key millions of rows by
# it (a backtest, the statistics): tuples, hashed in C. CardKey adds the source.
CardSlot = tuple[str, int]  # (node_id, gpu_index)
PhysicalCard = tuple[str, int, "str | None"]  # (node_id, gpu_index, gpu_uuid): a swap is another
# A physical card's first fault event in a period, as the store reads it: (node_id, gpu_index,
# gpu_uuid, at). The statistics' ``store.statistics.stats_queries.Fault`` adds what predicted it
# and gives this shape back as ``Fault.event``.
FirstFault = tuple[str, int, "str | None", datetime]


@dataclass(frozen=True, slots=True)
class CardKey:
    """A card slot: node, physical index (as the tool reports it) and data source."""

    node_id: str
    gpu_index: int
    source: str = SOURCE_REAL


@dataclass(frozen=True, slots=True)
class Counters:
    """The five health counters; ``None`` is unknown."""

    ecc_uncorrected_total: int | None = None
    ecc_corrected_total: int | None = None
    retired_pages: int | None = None
    remapped_rows_pending: int | None = None
    remapped_rows_failure: int | None = None

    def as_tuple(self) -> tuple[int | None, ...]:
        return (
            self.ecc_uncorrected_total,
            self.ecc_corrected_total,
            self.retired_pages,
            self.remapped_rows_pending,
            self.remapped_rows_failure,
        )

    def all_unknown(self) -> bool:
        return all(v is None for v in self.as_tuple())


@dataclass(frozen=True, slots=True)
class CardDetails:
    """A card's details beside the five counters (``gpu_health.contract.DETAIL_KEYS``):
    row-remap details, the driver's recovery action (its NVML value, the index in
    ``RECOVERY_ACTIONS``), pending page retirement (0/1), and beyond memory the PCIe link width
    (now and at most), the thermal and power-brake slowdown time (microseconds, cumulative), the
    fabric state (its index in ``FABRIC_STATES``) and status (0/1), and the PCIe replays since
    the last GPU reset. ``None`` is unknown."""

    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_banks_max: int | None = None
    remap_banks_high: int | None = None
    remap_banks_partial: int | None = None
    remap_banks_low: int | None = None
    remap_banks_none: int | None = None
    recovery_action: int | None = None
    retired_pages_pending: int | None = None
    pcie_link_width: int | None = None
    pcie_link_width_max: int | None = None
    sw_thermal_slowdown_us: int | None = None
    hw_thermal_slowdown_us: int | None = None
    hw_power_brake_slowdown_us: int | None = None
    fabric_state: int | None = None
    fabric_status_success: int | None = None
    pcie_replays: int | None = None
    nvlink_errors: int | None = None

    def as_tuple(self) -> tuple[int | None, ...]:
        return tuple(getattr(self, key) for key in DETAIL_KEYS)


UNKNOWN_DETAILS: Final = CardDetails()


@dataclass(frozen=True, slots=True)
class Sample:
    """One stored (or to-be-stored) row of ``gpu_health_samples``. ``sampled_at`` is aware UTC."""

    key: CardKey
    gpu_uuid: str | None
    sampled_at: datetime
    counters: Counters
    details: CardDetails = UNKNOWN_DETAILS


class XidKey(NamedTuple):
    """One XID series of a card slot (the UUID is data, as for samples: a swap is a change).

    A named tuple, not a dataclass like the others: a 100,000-card cycle builds and hashes
    500,000 of these and of :class:`XidSample`, and a tuple is built and hashed in C (the
    cycle's XID rows cost half the CPU). Immutable all the same."""

    node_id: str
    gpu_index: int
    source: str
    xid: int

    @property
    def card(self) -> CardKey:
        return CardKey(self.node_id, self.gpu_index, self.source)


class XidSample(NamedTuple):
    """One stored (or to-be-stored) row of ``gpu_health_xid_samples``; aware-UTC time."""

    key: XidKey
    gpu_uuid: str | None
    sampled_at: datetime
    count: int  # type: ignore[assignment]  # the column's name; shadows tuple.count, unused


class SxidKey(NamedTuple):
    """One NVSwitch SXid series of a node: the switch as the kernel line names it (its number
    and PCI id), the SXid and whether the driver called it fatal. A switch is not a card: the
    key names the node and no GPU."""

    node_id: str
    source: str
    nvswitch: int
    pci_bus_id: str
    sxid: int
    fatal: bool


class SxidSample(NamedTuple):
    """One stored (or to-be-stored) row of ``gpu_health_sxid_samples``; aware-UTC time."""

    key: SxidKey
    sampled_at: datetime
    count: int  # type: ignore[assignment]  # the column's name; shadows tuple.count, unused
