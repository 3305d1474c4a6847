"""The train-part choice and the test-part verdict (pure)."""

from __future__ import annotations

from typing import Any

from gpu_health.evaluator.backtest.compare import Point
from gpu_health.evaluator.calibrate.choose import Candidate, Objective, choose, verdict


def metrics(precision: float | None, recall: float | None,
            saved: float | None = None) -> dict[str, Any]:
    return {"first_fault": {"precision": precision, "recall": recall},
            "gpu_hours_saved": saved}


def test_recall_objective_needs_the_precision_then_ties_by_precision_then_changes() -> None:
    objective = Objective("recall", 0.2)
    found = [
        Candidate("eager", 1, metrics(0.05, 0.9)),  # more recall, too imprecise
        Candidate("b", 2, metrics(0.25, 0.7)),
        Candidate("a", 1, metrics(0.25, 0.7)),  # same numbers, fewer changes: preferred
        Candidate("c", 1, metrics(0.3, 0.6)),
        Candidate("thin", 0, metrics(None, None)),  # not enough data: cannot be chosen
    ]
    picked = choose(objective, found)
    assert picked is not None and picked.version == "a"
    assert choose(objective, [Candidate("b", 2, metrics(0.21, 0.7)),
                              Candidate("a", 1, metrics(0.4, 0.7))]).version == "a"  # type: ignore[union-attr]
    assert choose(Objective("recall", 0.5), found) is None


def test_cost_objective_takes_the_most_saved() -> None:
    found = [Candidate("x", 1, metrics(0.1, 0.9, 120.0)), Candidate("y", 3, metrics(0.3, 0.5,
                                                                                    400.0)),
             Candidate("z", 1, metrics(0.3, 0.5, None))]
    assert choose(Objective("cost"), found).version == "y"  # type: ignore[union-attr]


def pt(name: str, hits: int | None, matured: int, caught: int | None,
       faulty: int = 32) -> Point:
    """A test-part point from counts (None: the ratio is withheld, not enough data)."""
    return Point(name, None if hits is None else hits / matured,
                 None if caught is None else caught / faulty, hits=hits or 0, matured=matured,
                 faulty=faulty, caught=frozenset(f"f{i}" for i in range(caught or 0)))


def kw(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "test_first_faults": 30, "min_test_faults": 20, "objective": Objective(),
        "chosen": pt("cal", 23, 100, 24), "base": pt("v1", 0, 40, 0),
        "baselines": [pt("naive", 5, 500, 26), pt("repeat", None, 0, None)]}
    return base | changes


def test_verdicts() -> None:
    good = verdict(**kw())
    assert good.status == "better", good.reason
    assert "beyond chance" in good.reason and "no baseline beats it" in good.reason
    thin = verdict(**kw(test_first_faults=19))
    assert thin.status == "insufficient" and "19 first faults, fewer than the 20" in thin.reason
    assert verdict(**kw(chosen=None)).status == "no_candidate"
    same = verdict(**kw(chosen=pt("v1", 0, 40, 0)))
    assert same.status == "not_better" and "the base v1 itself" in same.reason
    worse = verdict(**kw(chosen=pt("cal", 0, 40, 0), base=pt("v1", 10, 40, 12)))
    assert worse.status == "not_better" and "v1 beats cal beyond chance" in worse.reason
    trade = verdict(**kw(base=pt("v1", 50, 100, 3)))
    assert trade.status == "not_better" and "neither beats the other" in trade.reason
    unknown = verdict(**kw(base=pt("v1", None, 0, None)))
    assert unknown.status == "not_better" and "not comparable" in unknown.reason
    beaten = verdict(**kw(baselines=[pt("naive", 60, 100, 31)]))
    assert beaten.status == "not_better" and "a baseline beats it" in beaten.reason
    # ahead on points but within chance: not better
    chance = verdict(**kw(chosen=pt("cal", 3, 60, 4), base=pt("v1", 2, 65, 2)))
    assert chance.status == "not_better" and "neither beats the other" in chance.reason
    # insufficient comes first, whatever the search found
    assert verdict(**kw(test_first_faults=3, chosen=None)).status == "insufficient"
