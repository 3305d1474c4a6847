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
| nvlink_errors_     | the card's NVLink errors grew by >= ``weak_nvlink_errors`` over the   |
| rising             | last growth window (0: off)                                           |

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


def _rising(key: str, what: str, now: int | None, before: int | None, need: int,
            p: RuleParams) -> SignalHit | None:
    """Signal ``<key>_rising``: the count ``key`` added over the last growth window, at least
    ``need`` (0: off). A count that went down was reset (a GPU reset, a driver reload,
    ``nvidia-smi nvlink -r``) within the window: what it added since is unknown, so no hit."""
    if need == 0 or now is None or before is None or now < before or now - before < need:
        return None
    return SignalHit(key + "_rising", "weak",
                     f"{what} +{now - before} in the last {p.growth_window_hours}h (>= {need})",
                     ((key + "_before", before), (key, now)))


def _replays_rising(f: CardFeatures, p: RuleParams) -> SignalHit | None:
    return _rising("pcie_replays", "PCIe replays", f.pcie_replays, f.pcie_replays_before,
                   p.weak_pcie_replays, p)


def _nvlink_rising(f: CardFeatures, p: RuleParams) -> SignalHit | None:
    return _rising("nvlink_errors", "NVLink errors", f.nvlink_errors, f.nvlink_errors_before,
                   p.weak_nvlink_errors, p)


# The weak layer: read only when the rule's weak_gate is not "none"; never fires alone.
WEAK_SIGNALS: tuple[Signal, ...] = (
    Signal("thermal_slowdown", "weak", _thermal_slowdown),
    Signal("pcie_link_degraded", "weak", _link_degraded),
    Signal("pcie_replays_rising", "weak", _replays_rising),
    Signal("nvlink_errors_rising", "weak", _nvlink_rising),
)
