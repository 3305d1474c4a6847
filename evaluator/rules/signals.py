"""The signal table of the reference design, as pure functions (features + params -> hits).

| layer  | signal                  | fires when                                                 |
|--------|-------------------------|------------------------------------------------------------|
| strong | ecc_uncorrected_present | uncorrectable count at t0 > 0                              |
| strong | remap_failure_present   | row-remap failure at t0 > 0 (spare rows exhausted)         |
| trend  | ecc_corrected_growth    | magnitude, ratio AND shape gates (see :func:`assess_growth`) |
| trend  | remap_pending_growth    | pending remaps grew over the last growth window and > 0    |
| trend  | retired_pages_growth    | retired pages grew over the last growth window and > 0     |
| weak   | thermal_slowdown        | thermal slowdown time over the last growth window          |
|        |                         | >= weak_slowdown_minutes                                   |
| weak   | pcie_link_degraded      | PCIe link width at t0 below its max                        |
| weak   | pcie_replays_rising     | PCIe replays over the last growth window                   |
|        |                         | >= weak_pcie_replays (0: off)                              |
| weak   | nvlink_errors_rising    | the card's NVLink errors over the last growth window       |
|        |                         | >= weak_nvlink_errors (0: off)                             |

Weak signals never fire alone (:func:`decide` drops decisions of weak hits) and are read only
when the rule's ``weak_gate`` is not ``none``; with ``require`` a trend decision needs one too.

Any unknown value a signal needs abandons that signal: "no history" is never "grew from 0".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from typing import SupportsInt

from gpu_health.evaluator.rules.evaluation import (
    CardFeatures,
    Check,
    Decision,
    Layer,
    Signal,
    SignalHit,
)
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.rules.weak_signals import WEAK_SIGNALS


@dataclass(frozen=True, slots=True)
class GrowthAssessment:
    """The correctable-growth computation, gate by gate, for evidence and for tests that pin the
    reference's worked reasoning. ``abandoned`` is set (and the gates are False) when a boundary
    value is unknown, the baseline has too few samples, or the counter went down (reset)."""

    abandoned: str | None
    deltas: tuple[int, ...] = ()  # d_0 (newest window) .. d_{k-1}
    baseline_increase: int | None = None  # C(t0) - C(t0 - B)
    baseline_mean: float | None = None  # per growth window
    ratio: float | None = None  # gated d_0 / baseline_mean; bounded by B / g
    capped: tuple[int, ...] | None = None  # d_i, its busiest hours capped (cap_busiest_hours)
    magnitude_ok: bool = False
    ratio_ok: bool = False
    shape_ok: bool = False

    @property
    def fires(self) -> bool:
        return self.abandoned is None and self.magnitude_ok and self.ratio_ok and self.shape_ok


def assess_growth(f: CardFeatures, p: RuleParams) -> GrowthAssessment:
    """d_i = C(t0 - i*g) - C(t0 - (i+1)*g). Fires when d_0 >= min_increase, d_0 >= ratio x the
    baseline mean per window, and d_{k-1} < ... < d_1 < d_0 (strictly: a constant rate is not
    acceleration). The ratio gate is compared exactly, in integers: with the ratio as the
    fraction its decimal text says (1.2 means 6/5, not 1.19999...), d_0 >= (n/d) x increase x
    g / B is d_0 x B x d >= n x increase x g. The floats reported beside it are correctly
    rounded quotients of the same integers.

    With ``cap_busiest_hours`` n > 0 the magnitude, ratio and shape gates read each window's
    increase with its n busiest hours counted as its (n+1)-th busiest (:func:`capped_increases`;
    the baseline mean stays as it is). A burst confined to n - 1 hours touches at most n hourly
    buckets wherever the window boundaries fall, so on a flat or steady card the capped windows
    are those of the same card without it: the burst cannot shape a rise or pass the magnitude
    gate, and it only raises the baseline mean. A ramp spread over the day keeps nearly all of
    its increase. A capped increase is never above d_0, so a last window that fails the
    magnitude gate as it is is not capped (its hourly values are not read)."""
    k = p.consecutive_windows
    values = f.corrected
    if len(values) != k + 1:
        return GrowthAssessment(f"features carry {len(values) - 1} windows, rule needs {k}")
    if f.corrected_baseline is None or any(v is None for v in values):
        return GrowthAssessment("a correctable-ECC boundary value is unknown")
    if f.baseline_samples < p.min_samples:
        return GrowthAssessment(
            f"{f.baseline_samples} samples in the baseline span, need {p.min_samples}"
        )
    known = [int(v) for v in values if v is not None]
    deltas = tuple(known[i] - known[i + 1] for i in range(k))
    increase = known[0] - f.corrected_baseline
    if increase < 0 or any(d < 0 for d in deltas):
        return GrowthAssessment("correctable count went down (counter reset)", deltas, increase)
    gated, capped = deltas, None
    if p.cap_busiest_hours and deltas[0] >= p.min_increase:
        found = capped_increases(f.hourly, p)
        if isinstance(found, str):
            return GrowthAssessment(found, deltas, increase)
        gated = capped = found
    g_hours, b_hours = p.growth_window_hours, p.baseline_days * 24
    num, den = _exact(p.ratio)
    return GrowthAssessment(
        abandoned=None,
        deltas=deltas,
        baseline_increase=increase,
        baseline_mean=increase * g_hours / b_hours,
        ratio=None if increase == 0 else gated[0] * b_hours / (increase * g_hours),
        capped=capped,
        magnitude_ok=gated[0] >= p.min_increase,
        ratio_ok=gated[0] * b_hours * den >= num * increase * g_hours,
        shape_ok=all(gated[i] > gated[i + 1] for i in range(k - 1)),
    )


def capped_increases(hourly: tuple[int | None, ...] | None,
                      p: RuleParams) -> tuple[int, ...] | str:
    """Per growth window i (newest first), the sum of its g hourly increases with the
    ``cap_busiest_hours`` largest counted as the next largest; or why it cannot be known (a
    reason, as ``abandoned``)."""
    g, k, n = p.growth_window_hours, p.consecutive_windows, p.cap_busiest_hours
    if hourly is None or len(hourly) != k * g + 1:
        return f"the correctable count was not read hour by hour over the last {k * g} h"
    if any(v is None for v in hourly):
        return "an hourly correctable-ECC value is unknown"
    known = [int(v) for v in hourly if v is not None]
    steps = [known[h] - known[h + 1] for h in range(k * g)]
    if any(step < 0 for step in steps):
        return "correctable count went down (counter reset)"
    capped = []
    for i in range(k):
        busiest = sorted(steps[i * g:(i + 1) * g], reverse=True)
        capped.append(sum(busiest[n:]) + n * busiest[n])
    return tuple(capped)


@lru_cache(maxsize=256)
def _exact(ratio: float) -> tuple[int, int]:
    """The ratio as the fraction its shortest decimal text says (numerator, denominator)."""
    exact = Fraction(str(ratio))
    return exact.numerator, exact.denominator


def _growth(f: CardFeatures, p: RuleParams) -> SignalHit | None:
    a = assess_growth(f, p)
    if not a.fires or a.baseline_mean is None or a.ratio is None:
        return None
    g, d0 = p.growth_window_hours, a.deltas[0]
    gated = a.deltas if a.capped is None else a.capped
    shape = " < ".join(str(d) for d in reversed(gated))
    values: tuple[tuple[str, int | float | str | None], ...] = (
        ("corrected", ",".join(str(v) for v in f.corrected)),
        ("corrected_baseline", f.corrected_baseline),
        ("ratio", round(a.ratio, 4)))
    capped = ""
    if a.capped is not None:
        n = p.cap_busiest_hours
        capped = f" with each window's {n} busiest hours capped at its next busiest"
        values += (("capped", ",".join(str(v) for v in a.capped)),)
    return SignalHit(
        "ecc_corrected_growth",
        "trend",
        f"correctable ECC +{d0} in the last {g}h"
        + ("" if a.capped is None else f", +{gated[0]}{capped}")
        + f" (>= {p.min_increase}), {a.ratio:.2f}x the "
        f"{p.baseline_days}d mean of {a.baseline_mean:.1f} per {g}h (>= {p.ratio:g}x); "
        f"last {p.consecutive_windows} windows strictly increasing"
        + ("" if a.capped is None else " (capped)") + f": {shape}",
        values,
    )


def _present(name: str, attr: str, what: str) -> Check:
    def check(f: CardFeatures, p: RuleParams) -> SignalHit | None:
        value = getattr(f, attr)
        if value is None or value <= 0:
            return None
        return SignalHit(name, "strong", f"{what} is {value} (> 0) at t0", ((attr, value),))

    return check


def _grew(name: str, attr: str, what: str) -> Check:
    def check(f: CardFeatures, p: RuleParams) -> SignalHit | None:
        now, before = getattr(f, attr), getattr(f, attr + "_before")
        if now is None or before is None or now <= before or now <= 0:
            return None
        return SignalHit(
            name, "trend", f"{what} {before} -> {now} over the last {p.growth_window_hours}h",
            ((attr + "_before", before), (attr, now)),
        )

    return check


# Order is priority: the first hit becomes the prediction's signal and layer.
SIGNALS: tuple[Signal, ...] = (
    Signal("ecc_uncorrected_present", "strong",
           _present("ecc_uncorrected_present", "uncorrected", "uncorrectable ECC count")),
    Signal("remap_failure_present", "strong",
           _present("remap_failure_present", "remap_failure", "row-remap failure")),
    Signal("ecc_corrected_growth", "trend", _growth),
    Signal("remap_pending_growth", "trend",
           _grew("remap_pending_growth", "remap_pending", "pending row remaps")),
    Signal("retired_pages_growth", "trend",
           _grew("retired_pages_growth", "retired_pages", "retired pages")),
)


_RANK: dict[Layer, int] = {"strong": 0, "trend": 1, "weak": 2}


def could_fire(f: CardFeatures, p: RuleParams) -> bool:
    """A cheap necessary condition of ``decide(f, p) is not None`` for the signals of
    :data:`SIGNALS`: a count above 0 for the strong signals, a known last-window increase of
    at least ``min_increase`` for the growth signal, a known rise above 0 for the pending-remap
    and retired-page signals. A replay that decides the same card thousands of times asks this
    first (a test checks it against :func:`decide` on generated features); the worker and the
    backtest ask it of raw feature rows through its two halves, :func:`fires_at_any_threshold`
    and :func:`last_increase`, joined by :func:`could_fire_with`."""
    c = f.corrected
    return could_fire_with(
        fires_at_any_threshold(f.uncorrected, f.remap_failure, f.remap_pending,
                               f.remap_pending_before, f.retired_pages, f.retired_pages_before),
        last_increase(c[0], c[1]) if len(c) > 1 else None, p)


def fires_at_any_threshold(uncorrected: int | None, remap_failure: int | None,
                           remap_pending: int | None, remap_pending_before: int | None,
                           retired_pages: int | None, retired_pages_before: int | None) -> bool:
    """The part of :func:`could_fire` no threshold changes: a strong signal's count above 0, or
    a known rise above 0 of pending remaps or retired pages."""
    return (uncorrected or 0) > 0 or (remap_failure or 0) > 0 or any(
        now is not None and before is not None and now > before and now > 0
        for now, before in ((remap_pending, remap_pending_before),
                            (retired_pages, retired_pages_before)))


def last_increase(newest: SupportsInt | None, before: SupportsInt | None) -> int | None:
    """The last growth window's correctable increase (None: either end unknown)."""
    return None if newest is None or before is None else int(newest) - int(before)


def reaches_min_increase(increase: int | None, p: RuleParams) -> bool:
    """Whether a last-window increase can open the growth gate of ``p``."""
    return increase is not None and increase >= p.min_increase


def could_fire_with(always: bool, increase: int | None, p: RuleParams) -> bool:
    """:func:`could_fire` from its two halves (``always``: :func:`fires_at_any_threshold`)."""
    return always or reaches_min_increase(increase, p)


def decide(f: CardFeatures, p: RuleParams,
           signals: tuple[Signal, ...] = SIGNALS) -> Decision | None:
    """All hits of one card, strongest first; None unless a strong or trend signal fired (the
    weak layer is a hard gate: weak observations can support a prediction, never make one).
    A rule whose ``weak_gate`` is not ``none`` also asks :data:`WEAK_SIGNALS`; with
    ``require``, a decision whose strongest hit is a trend needs a weak hit beside it."""
    table = signals if not p.reads_weak else (*signals, *WEAK_SIGNALS)
    # The table, not the check, owns name and layer: a check cannot promote itself.
    layered = [
        replace(hit, signal=s.name, layer=s.layer)
        for s in table
        if (hit := s.check(f, p)) is not None
    ]
    layered.sort(key=lambda h: _RANK[h.layer])  # stable: table order within a layer
    if not layered or layered[0].layer == "weak":
        return None
    if p.weak_gate == "require" and layered[0].layer == "trend" \
            and layered[-1].layer != "weak":
        return None
    return Decision(f, tuple(layered))
