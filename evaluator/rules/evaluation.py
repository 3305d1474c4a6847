"""Plain data of the rule engine: card features in, signal hits and decisions out (pure).

``CardFeatures`` holds the boundary values the store extracted for one card at one evaluation
time. Every value is ``int | None``: ``None`` means unknown (no fresh, same-card, non-NULL sample
near the boundary), never 0, and a signal that needs an unknown value is abandoned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from gpu_health.evaluator.rules.params import RuleParams

Layer = Literal["strong", "trend", "weak"]

Value = int | float | str | None


@dataclass(frozen=True, slots=True)
class CardFeatures:
    """Boundary values of one card (slot + the UUID of its t0 sample) at evaluation time ``at``.

    ``corrected[i]`` is the correctable count at ``t0 - i * g`` for i in 0..k (k = consecutive
    windows); ``corrected_baseline`` at ``t0 - B``. The ``*_before`` values are at ``t0 - g``.
    ``t0`` is the stored ``sampled_at`` of the card's last sample at or before ``at``.
    ``hourly[j]`` is the correctable count at ``t0 - j`` hours for j in 0..k*g, read only for a
    rule that caps its growth windows' busiest hours and only when the last window's increase
    can pass its magnitude gate (None: not read).

    The weak layer's values are read only for a rule that reads it (``weak_gate``): the
    thermal slowdown time (hardware and software, microseconds since the driver loaded) at t0
    and ``t0 - g``, the PCIe link width now and at most at t0, and the PCIe replays since the
    last GPU reset at t0 and ``t0 - g``.
    """

    node_id: str
    gpu_index: int
    gpu_uuid: str | None
    source: str
    at: datetime
    t0: datetime
    corrected: tuple[int | None, ...]
    corrected_baseline: int | None
    baseline_samples: int
    uncorrected: int | None = None
    remap_failure: int | None = None
    remap_pending: int | None = None
    remap_pending_before: int | None = None
    retired_pages: int | None = None
    retired_pages_before: int | None = None
    hourly: tuple[int | None, ...] | None = None
    hw_thermal_slowdown_us: int | None = None
    hw_thermal_slowdown_us_before: int | None = None
    sw_thermal_slowdown_us: int | None = None
    sw_thermal_slowdown_us_before: int | None = None
    pcie_link_width: int | None = None
    pcie_link_width_max: int | None = None
    pcie_replays: int | None = None
    pcie_replays_before: int | None = None
    nvlink_errors: int | None = None
    nvlink_errors_before: int | None = None


@dataclass(frozen=True, slots=True)
class SignalHit:
    """One signal that fired: machine name, layer, evidence with numbers, and the values used."""

    signal: str
    layer: Layer
    evidence: str
    values: tuple[tuple[str, Value], ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """A card that should get a prediction. ``hits[0]`` is the primary (highest-layer) signal;
    weak hits only ever appear next to a strong or trend hit."""

    features: CardFeatures
    hits: tuple[SignalHit, ...]

    @property
    def primary(self) -> SignalHit:
        return self.hits[0]

    @property
    def signal(self) -> str:
        return self.primary.signal

    @property
    def layer(self) -> Layer:
        return self.primary.layer

    @property
    def evidence(self) -> str:
        return "; ".join(f"[{h.layer}] {h.signal}: {h.evidence}" for h in self.hits)


Check = Callable[[CardFeatures, "RuleParams"], SignalHit | None]


@dataclass(frozen=True, slots=True)
class Signal:
    """One row of a signal table: its name and layer belong to the table, not the check."""

    name: str
    layer: Layer
    check: Check
