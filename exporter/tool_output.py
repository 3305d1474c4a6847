"""Plain data the exporter passes between parsers, sources, cache and collector.

Frozen dataclasses only, no I/O. A counter value is ``int | None`` where ``None`` means unknown;
unknown is never written as 0 anywhere in the exporter, and an unknown counter is simply absent
from ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gpu_health.contract import (
    COUNTER_KEYS,
    LINK_KEYS,
    REMAP_KEYS,
    CounterKey,
    LinkKey,
    RemapKey,
)

Counters = Mapping[CounterKey, int | None]
RemapDetails = Mapping[RemapKey, int | None]
PcieLink = Mapping[LinkKey, int | None]


def make_remap(known: Mapping[RemapKey, int | None] | None = None) -> RemapDetails:
    """All seven row-remap detail keys, ``None`` (unknown) for every key not given."""
    values: dict[RemapKey, int | None] = dict.fromkeys(REMAP_KEYS)
    values.update(known or {})
    return MappingProxyType(values)


def make_link(known: Mapping[LinkKey, int | None] | None = None) -> PcieLink:
    """All four PCIe link keys, ``None`` (unknown) for every key not given."""
    values: dict[LinkKey, int | None] = dict.fromkeys(LINK_KEYS)
    values.update(known or {})
    return MappingProxyType(values)


def _no_slowdown() -> Mapping[str, int]:
    return MappingProxyType({})


def _no_links() -> Mapping[tuple[int, str], int | None]:
    return MappingProxyType({})


def make_counters(known: Mapping[CounterKey, int | None] | None = None) -> Counters:
    """All five counter keys, ``None`` (unknown) for every key not given; read-only."""
    values: dict[CounterKey, int | None] = dict.fromkeys(COUNTER_KEYS)
    for key, value in (known or {}).items():
        if key not in values:
            raise KeyError(f"not a counter key: {key!r}")
        values[key] = value
    return MappingProxyType(values)


@dataclass(frozen=True, slots=True)
class CardReading:
    """One card as one vendor tool listed it in one collection.

    ``gpu`` is the index the tool itself printed (never the row position). ``uuid`` is ``None``
    when the tool reports no UUID (the metric label is then ""). ``pci_bus_id`` is what the tool
    printed; the XID follower maps kernel-log lines (which name PCI addresses) to NVIDIA cards
    with it.
    """

    vendor: str
    gpu: int
    uuid: str | None
    model: str
    counters: Counters = field(default_factory=make_counters)
    pci_bus_id: str | None = None
    remap: RemapDetails = field(default_factory=make_remap)  # NVIDIA only, where listed
    # NVIDIA only, where the driver lists the fields (None: unknown or not asked):
    recovery_action: str | None = None  # one of contract.RECOVERY_ACTIONS
    pages_pending: int | None = None  # retired_pages.pending: 1 yes, 0 no
    pcie: PcieLink = field(default_factory=make_link)
    # contract.SLOWDOWN_REASONS -> microseconds; a reason not known is not a key
    slowdown_us: Mapping[str, int] = field(default_factory=_no_slowdown)
    fabric_state: str | None = None  # one of contract.FABRIC_STATES
    fabric_ok: int | None = None  # fabric.status: 1 "Success", 0 an error
    # nvidia-smi -q's PCIe replay counters since the last GPU reset (None: unknown or not read)
    pcie_replays: int | None = None
    pcie_replay_rollovers: int | None = None
    # nvidia-smi nvlink -e: (link, contract.NVLINK_COUNTERS name) -> count, None where the value
    # was unusable; empty when not read or the card lists no link
    nvlink_errors: Mapping[tuple[int, str], int | None] = field(default_factory=_no_links)


@dataclass(frozen=True, slots=True)
class Failure:
    """Part of a collection that failed while the rest succeeded (one Ascend card's query).

    The cards it concerns stay listed with unknown counters; ``reason`` is counted in the
    vendor's error counter like a failed tick's.
    """

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """What a parser made of one tool output.

    ``anomalies`` describes cells that were neither a number nor one of the tool's documented
    "unknown" spellings (a negative count, text where a count belongs, ...). Those cells became
    unknown; the rest of the output is still good, and the anomalies are counted in a self-metric.
    ``failures`` are parts of the collection (one card's query of several) that failed outright.
    """

    readings: tuple[CardReading, ...]
    anomalies: tuple[str, ...] = ()
    failures: tuple[Failure, ...] = ()


def duplicate_uuids(readings: tuple[CardReading, ...]) -> tuple[Failure, ...]:
    """One failure per UUID that two indexes report: one physical card cannot sit in two
    slots, so the tool's listing is wrong somewhere. Both cards are still exported (which one
    is right cannot be told); the failure is logged and counted (``duplicate_uuid``)."""
    slots: dict[str, list[int]] = {}
    for reading in readings:
        if reading.uuid:
            slots.setdefault(reading.uuid, []).append(reading.gpu)
    return tuple(Failure("duplicate_uuid", f"UUID {uuid} reported at indexes "
                                           f"{', '.join(map(str, sorted(gpus)))}")
                 for uuid, gpus in sorted(slots.items()) if len(gpus) > 1)


def nvlink_total(counts: Mapping[tuple[int, str], int | None]) -> int | None:
    """Every NVLink counter of every link added up, as DCGM's ``*_TOTAL`` fields add up the
    links; None (unknown) when none was read or one of them is unusable."""
    if not counts or any(value is None for value in counts.values()):
        return None
    return sum(value for value in counts.values() if value is not None)
