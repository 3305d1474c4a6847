"""The weak layer's signals (pure): observations of a card's health beyond memory that can
support or gate a trend prediction, never make one
(:func:`gpu_health.evaluator.rules.signals.decide`).

| signal             | fires when                                                            |
|--------------------|-----------------------------------------------------------------------|
| thermal_slowdown   | hardware + software thermal slowdown over the last growth window      |
|                    | >= ``weak_slowdown_minutes``                                          |
| pcie_link_degraded | the PCIe link at t0 runs with fewer lanes than it can                 |
| pcie_replays_rising| the PCIe replays grew by >= ``weak_pcie_replays`` over the last growth |
|                    | window (0: off)                                                       |

Read only for a rule whose ``weak_gate`` is not ``none``. Unknown is never 0: a value a signal
needs that is unknown abandons it.
"""

from __future__ import annotations

from gpu_health.evaluator.rules.evaluation import CardFeatures, Signal, SignalHit
from gpu_health.evaluator.rules.params import RuleParams


def _thermal_slowdown(f: CardFeatures, p: RuleParams) -> SignalHit | None:
    """Hardware plus software thermal slowdown time over the last growth window. A reason is
    used when both ends are known and it did not go down (a driver reload restarts it);
    unknown when no reason is."""
    grown, values = [], []
    for reason in ("hw_thermal_slowdown_us", "sw_thermal_slowdown_us"):
        now, before = getattr(f, reason), getattr(f, reason + "_before")
        if now is not None and before is not None and now >= before:
            grown.append(now - before)
            values += [(reason + "_before", before), (reason, now)]
    need = p.weak_slowdown_minutes * 60_000_000
    if not grown or sum(grown) < need:
        return None
    minutes = sum(grown) / 60_000_000
    return SignalHit(
        "thermal_slowdown", "weak",
        f"clocks held down for heat {minutes:.0f} min in the last {p.growth_window_hours}h "
        f"(>= {p.weak_slowdown_minutes} min)", tuple(values))


def _link_degraded(f: CardFeatures, p: RuleParams) -> SignalHit | None:
    width, most = f.pcie_link_width, f.pcie_link_width_max
    if width is None or most is None or width >= most:
        return None
    return SignalHit("pcie_link_degraded", "weak",
                     f"PCIe link x{width} of x{most} at t0",
                     (("pcie_link_width", width), ("pcie_link_width_max", most)))


def _replays_rising(f: CardFeatures, p: RuleParams) -> SignalHit | None:
    """Replays added over the last growth window. A count that went down was reset (a GPU
    reset or driver reload) within the window: what it added since is unknown, so no hit."""
    now, before = f.pcie_replays, f.pcie_replays_before
    if p.weak_pcie_replays == 0 or now is None or before is None or now < before:
        return None
    if now - before < p.weak_pcie_replays:
        return None
    return SignalHit("pcie_replays_rising", "weak",
                     f"PCIe replays +{now - before} in the last {p.growth_window_hours}h "
                     f"(>= {p.weak_pcie_replays})",
                     (("pcie_replays_before", before), ("pcie_replays", now)))


# The weak layer: read only when the rule's weak_gate is not "none"; never fires alone.
WEAK_SIGNALS: tuple[Signal, ...] = (
    Signal("thermal_slowdown", "weak", _thermal_slowdown),
    Signal("pcie_link_degraded", "weak", _link_degraded),
    Signal("pcie_replays_rising", "weak", _replays_rising),
)
