"""The choice on the train part and the verdict on the test part (pure: metrics in, words out).

**Objective** (train part only). ``recall``: the highest first-fault recall among candidates
whose first-fault precision is at least ``min_precision``; ties by precision, then by fewer
parameters changed from the base, then by name (so a run is reproducible). ``cost``: the most
GPU-hours saved; ties by fewer changes, then name. A candidate whose needed numbers are null
(not enough data) cannot meet the objective.

**Verdict** (test part), in this order:

- ``insufficient``: fewer than ``min_test_faults`` first faults in the test part. Too few to
  tell a better rule from luck: no rule is written, whatever the search found;
- ``no_candidate``: nothing met the objective on the train part;
- ``better``: the chosen version beats the base beyond chance
  (:func:`gpu_health.evaluator.backtest.compare.compare`: higher first-fault recall or precision
  by a difference whose 95% interval excludes 0, the other ratio not lower beyond chance) and no
  baseline beats it beyond chance;
- ``not_better``: anything else, with the comparison that failed (the choice is the base itself,
  the base or a baseline wins, neither beats the other beyond chance, or a number is null).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gpu_health.evaluator.backtest.compare import Point, compare

Status = Literal["better", "not_better", "insufficient", "no_candidate"]


@dataclass(frozen=True, slots=True)
class Objective:
    kind: Literal["recall", "cost"] = "recall"
    min_precision: float = 0.2

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "min_precision": self.min_precision}

    def text(self) -> str:
        if self.kind == "cost":
            return "the most GPU-hours saved on the train part"
        return (f"the highest train first-fault recall at a train first-fault precision of at "
                f"least {self.min_precision:g}")


@dataclass(frozen=True, slots=True)
class Candidate:
    version: str
    changes: int  # frozen parameters that differ from the base
    train: dict[str, Any]


def meets(objective: Objective, train: dict[str, Any]) -> bool:
    if objective.kind == "cost":
        return train["gpu_hours_saved"] is not None
    first = train["first_fault"]
    return (first["precision"] is not None and first["recall"] is not None
            and first["precision"] >= objective.min_precision)


def _rank(objective: Objective, c: Candidate) -> tuple[float, float, int, str]:
    first = c.train["first_fault"]
    if objective.kind == "cost":
        return (-c.train["gpu_hours_saved"], 0.0, c.changes, c.version)
    return (-first["recall"], -first["precision"], c.changes, c.version)


def choose(objective: Objective, candidates: Sequence[Candidate]) -> Candidate | None:
    eligible = [c for c in candidates if meets(objective, c.train)]
    return min(eligible, key=lambda c: _rank(objective, c)) if eligible else None


@dataclass(frozen=True, slots=True)
class Verdict:
    status: Status
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason}


def verdict(*, test_first_faults: int, min_test_faults: int, objective: Objective,
            chosen: Point | None, base: Point,
            baselines: Sequence[Point]) -> Verdict:
    """The rule of the module docstring; the points are the test part's."""
    if test_first_faults < min_test_faults:
        return Verdict("insufficient", (
            f"the test part has {test_first_faults} first faults, fewer than the "
            f"{min_test_faults} needed to tell a better rule from luck (--min-test-faults): "
            "no rule is written"))
    if chosen is None:
        return Verdict("no_candidate", f"no candidate reached {objective.text()}")
    if chosen.name == base.name:
        return Verdict("not_better", f"the search chose the base {base.name} itself: nothing "
                                     "in the space did better on the train part")
    against_base = compare(chosen, base)
    if against_base.winner != "a":
        return Verdict("not_better", f"on the test part: {against_base.reason}")
    beaten = [c.reason for b in baselines if (c := compare(chosen, b)).winner == "b"]
    if beaten:
        return Verdict("not_better", "on the test part a baseline beats it: "
                                     + "; ".join(beaten))
    return Verdict("better", f"on the test part: {against_base.reason}; no baseline beats it")
