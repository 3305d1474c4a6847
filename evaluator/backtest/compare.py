"""Which of two rule versions is better on the same data, and what a version's warnings are worth
(pure).

**Pareto on first faults.** Version A beats B when its first-fault recall is higher at a
first-fault precision at least B's, or its precision is higher at a recall at least B's. A
single number (F1, a recall at any precision) would let a rule that predicts every card every
week (recall 0.9, precision 0.03) look better than a useful one; a Pareto comparison never
trades one for the other silently. When neither dominates, the cost figure decides if the
operator gave costs; otherwise the answer is "neither dominates", with both points shown. A
null ratio (not enough data) makes the pair not comparable: no verdict is made of a number the
statistics withhold.

**Costs** (Boixaderas et al., "Cost-aware prediction of uncorrected DRAM errors in the field",
SC20): an unpredicted fault costs ``cost_failure`` GPU-hours (the job's GPUs x the mean time
since its last checkpoint plus the restart), and every prediction acted on costs
``cost_mitigation`` GPU-hours (a drain or a checkpoint), whether it turns out right or not. A
fault is saved only when the warning came at least ``mitigation_time`` ahead of it (a drain
that is still running when the card fails saves nothing). So, per class of predictions::

    gpu_hours_saved = faults warned early enough x cost_failure - predictions x cost_mitigation

Positive: acting on the version's predictions would have saved GPU-hours on this data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

Winner = Literal["a", "b"]


@dataclass(frozen=True, slots=True)
class Costs:
    """The operator's costs in GPU-hours, and how long a mitigation takes."""

    failure: float  # GPU-hours an unpredicted fault costs
    mitigation: float  # GPU-hours one acted-on prediction costs
    mitigation_time: timedelta = timedelta(0)

    def as_dict(self) -> dict[str, Any]:
        return {"cost_failure_gpu_hours": self.failure,
                "cost_mitigation_gpu_hours": self.mitigation,
                "mitigation_time_seconds": self.mitigation_time.total_seconds()}


def gpu_hours_saved(costs: Costs | None, warning_leads: Sequence[timedelta],
                    predictions: int) -> float | None:
    """The formula of the module docstring; ``warning_leads`` has one entry per predicted
    fault (fault time minus the time of the prediction that warned of it). None without costs."""
    if costs is None:
        return None
    saved = sum(1 for lead in warning_leads if lead >= costs.mitigation_time)
    return round(saved * costs.failure - predictions * costs.mitigation, 6)


@dataclass(frozen=True, slots=True)
class Point:
    """A version's first-fault precision and recall (None: not enough data) and, with costs,
    its GPU-hours saved."""

    name: str
    precision: float | None
    recall: float | None
    saved: float | None = None

    def text(self) -> str:
        shown = f"precision {_num(self.precision)}, recall {_num(self.recall)}"
        return shown + ("" if self.saved is None else f", {self.saved:g} GPU-hours saved")


@dataclass(frozen=True, slots=True)
class Comparison:
    """``winner`` None: not comparable, or neither dominates (``by`` says which)."""

    winner: Winner | None
    by: Literal["pareto", "cost", "neither", "not_comparable"]
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"winner": self.winner, "by": self.by, "reason": self.reason}


def _num(value: float | None) -> str:
    return "null" if value is None else f"{value:.3f}"


def dominates(a: Point, b: Point) -> bool:
    """Pareto: higher recall at precision >= b's, or higher precision at recall >= b's."""
    assert None not in (a.precision, a.recall, b.precision, b.recall)
    ap, ar, bp, br = a.precision or 0.0, a.recall or 0.0, b.precision or 0.0, b.recall or 0.0
    return (ar > br and ap >= bp) or (ap > bp and ar >= br)


def compare(a: Point, b: Point) -> Comparison:
    """The rule of the module docstring, with a sentence that says why."""
    missing = [f"{p.name}'s first-fault {k} is null (not enough data)"
               for p in (a, b) for k in ("precision", "recall") if getattr(p, k) is None]
    if missing:
        return Comparison(None, "not_comparable", "not comparable: " + "; ".join(missing))
    pairs: tuple[tuple[Winner, Point, Point], ...] = (("a", a, b), ("b", b, a))
    for winner, x, y in pairs:
        if dominates(x, y):
            return Comparison(winner, "pareto", f"{x.name} dominates {y.name} on first faults "
                                                f"({x.text()} vs {y.text()})")
    if a.saved is not None and b.saved is not None and a.saved != b.saved:
        winner, x, y = pairs[0] if a.saved > b.saved else pairs[1]
        return Comparison(winner, "cost", f"neither dominates on first faults; {x.name} saves "
                                          f"more GPU-hours ({x.saved:g} vs {y.saved:g})")
    return Comparison(None, "neither", f"neither dominates: {a.name} ({a.text()}) vs {b.name} "
                                       f"({b.text()})")
