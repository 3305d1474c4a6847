"""Which of two rule versions is better on the same data, beyond chance, and what a version's
warnings are worth (pure).

**Beyond chance, on first faults.** Version A beats B when one of its first-fault ratios is
higher by a difference whose 95% interval excludes 0, and the other is not lower beyond chance
(:mod:`gpu_health.evaluator.stats.differences`): precision as two independent proportions of
each version's own matured predictions (Newcombe's hybrid score interval); recall paired over
the same faulty cards, each caught or not by each version (Newcombe's paired interval, and the
exact McNemar test must agree), when both versions judge the same faults (the same fault
definition); otherwise unpaired. Point estimates alone called precision 2/65 against 2/72 at the
same recall "dominates"; a single number (F1, a recall at any precision) would let a rule that
predicts every card every week (recall 0.9, precision 0.03) look better than a useful one. A
null ratio (not enough data) makes the pair not comparable: no verdict is made of a number the
statistics withhold. When neither beats the other beyond chance, the cost figure is said (which
would save more GPU-hours) but decides nothing: it has no interval.

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

from gpu_health.evaluator.stats.differences import (
    Difference,
    mcnemar_exact,
    paired_difference,
    unpaired_difference,
)

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
    """A version's first-fault precision and recall (None: not enough data), the counts they
    come from and, with costs, its GPU-hours saved."""

    name: str
    precision: float | None
    recall: float | None
    saved: float | None = None
    hits: int = 0  # matured predictions that were hits (precision's numerator)
    matured: int = 0
    faulty: int = 0  # first faults (recall's denominator)
    caught: frozenset[str] = frozenset()  # the first faults its windows held
    definition: tuple[int, ...] = ()  # fault_xids: the same faults only under the same one

    def text(self) -> str:
        shown = f"precision {_num(self.precision)}, recall {_num(self.recall)}"
        return shown + ("" if self.saved is None else f", {self.saved:g} GPU-hours saved")


@dataclass(frozen=True, slots=True)
class Comparison:
    """``winner`` None: not comparable, or neither beats the other beyond chance."""

    winner: Winner | None
    by: Literal["beyond_chance", "neither", "not_comparable"]
    reason: str
    precision: Difference | None = None  # first minus second
    recall: Difference | None = None
    mcnemar_p: float | None = None  # with a paired recall

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"winner": self.winner, "by": self.by, "reason": self.reason}
        if self.precision is not None and self.recall is not None:
            out["differences"] = {"precision": self.precision.as_dict(),
                                  "recall": self.recall.as_dict(),
                                  "recall_mcnemar_exact_p": None if self.mcnemar_p is None
                                  else round(self.mcnemar_p, 6)}
        return out


def _num(value: float | None) -> str:
    return "null" if value is None else f"{value:.3f}"


def differences(a: Point, b: Point) -> tuple[Difference, Difference, float | None]:
    """Precision and recall of ``a`` minus ``b`` with their intervals, and the exact McNemar
    p-value when the recall is paired."""
    precision = unpaired_difference(a.hits, a.matured, b.hits, b.matured)
    if a.definition == b.definition and a.faulty == b.faulty:
        both = len(a.caught & b.caught)
        only_a, only_b = len(a.caught - b.caught), len(b.caught - a.caught)
        recall = paired_difference(both, only_a, only_b, a.faulty - both - only_a - only_b)
        return precision, recall, mcnemar_exact(only_a, only_b)
    return precision, unpaired_difference(len(a.caught), a.faulty, len(b.caught),
                                          b.faulty), None


ALPHA = 0.05  # the level both the intervals (95%) and the exact McNemar test are read at


def beats(precision: Difference, recall: Difference, mcnemar_p: float | None = None) -> bool:
    """Better on one ratio beyond chance, and not worse beyond chance on the other. A paired
    recall differs beyond chance only when its interval excludes 0 **and** the exact McNemar
    test rejects at 5%: Newcombe's paired interval excludes 0 with five discordant cards all one
    way, where the exact test gives p = 0.0625 (on a fleet whose faults nothing predicts, that
    alone made a `better`)."""
    exact = mcnemar_p is None or mcnemar_p < ALPHA
    higher, lower = recall.above_zero and exact, recall.below_zero and exact
    return (higher and not precision.below_zero) or (precision.above_zero and not lower)


def compare(a: Point, b: Point) -> Comparison:
    """The rule of the module docstring, with a sentence that says why."""
    missing = [f"{p.name}'s first-fault {k} is null (not enough data)"
               for p in (a, b) for k in ("precision", "recall") if getattr(p, k) is None]
    if missing:
        return Comparison(None, "not_comparable", "not comparable: " + "; ".join(missing))
    precision, recall, p_value = differences(a, b)
    detail = (f"precision {a.name} - {b.name} {precision.text()} ({precision.method}), recall "
              f"{recall.text()} ({recall.method}"
              + ("" if p_value is None else f", exact McNemar p = {p_value:.3g}") + ")")
    if beats(precision, recall, p_value):
        return Comparison("a", "beyond_chance", f"{a.name} beats {b.name} beyond chance on "
                                                f"first faults: {detail}", precision, recall,
                          p_value)
    if beats(_flip(precision), _flip(recall), p_value):
        return Comparison("b", "beyond_chance", f"{b.name} beats {a.name} beyond chance on "
                                                f"first faults: {detail}", precision, recall,
                          p_value)
    costs = ""
    if a.saved is not None and b.saved is not None and a.saved != b.saved:
        x, y = (a, b) if a.saved > b.saved else (b, a)
        costs = (f"; {x.name} would save more GPU-hours ({x.saved:g} vs {y.saved:g}), which "
                 "has no interval and decides nothing")
    return Comparison(None, "neither", f"neither beats the other beyond chance: {detail}"
                                       + costs, precision, recall, p_value)


def _flip(d: Difference) -> Difference:
    return Difference(-d.estimate, -d.high, -d.low, d.method)
