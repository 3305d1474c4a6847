"""The Pareto rule between two versions and the cost formula (pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpu_health.evaluator.backtest.compare import Costs, Point, compare, gpu_hours_saved


@pytest.mark.parametrize("a, b, winner, by", [
    ((0.3, 0.6), (0.3, 0.5), "a", "pareto"),  # more recall at the same precision
    ((0.35, 0.5), (0.3, 0.5), "a", "pareto"),  # more precision at the same recall
    ((0.3, 0.6), (0.4, 0.7), "b", "pareto"),  # b is better on both
    ((0.21, 0.73), (0.027, 0.885), None, "neither"),  # a trade: no silent winner
    ((0.3, 0.5), (0.3, 0.5), None, "neither"),  # equal is not better
    ((None, 0.5), (0.3, 0.5), None, "not_comparable"),
    ((0.3, 0.5), (0.3, None), None, "not_comparable"),
])
def test_pareto(a: tuple[float | None, float | None], b: tuple[float | None, float | None],
                winner: str | None, by: str) -> None:
    got = compare(Point("A", *a), Point("B", *b))
    assert (got.winner, got.by) == (winner, by)


def test_costs_decide_only_when_neither_dominates() -> None:
    tuned, naive = Point("tuned", 0.21, 0.73, 400.0), Point("naive", 0.027, 0.885, -900.0)
    got = compare(tuned, naive)
    assert (got.winner, got.by) == ("a", "cost")
    assert got.reason == ("neither dominates on first faults; tuned saves more GPU-hours "
                          "(400 vs -900)")
    # a dominated version stays dominated whatever it saves
    assert compare(Point("x", 0.1, 0.2, 10**6), Point("y", 0.2, 0.3, 0.0)).winner == "b"
    # equal savings: still neither
    assert compare(Point("x", 0.1, 0.3, 5.0), Point("y", 0.2, 0.2, 5.0)).by == "neither"


def test_gpu_hours_saved() -> None:
    costs = Costs(failure=512.0, mitigation=8.0, mitigation_time=timedelta(hours=2))
    leads = [timedelta(days=5), timedelta(hours=2), timedelta(minutes=30)]
    # two faults warned at least 2 h ahead x 512 - 40 predictions x 8
    assert gpu_hours_saved(costs, leads, 40) == 2 * 512 - 40 * 8
    assert gpu_hours_saved(costs, [], 3) == -24.0  # predictions that saved nothing cost
    assert gpu_hours_saved(None, leads, 40) is None  # no costs: unknown, never 0
    assert gpu_hours_saved(Costs(100.0, 1.0), [timedelta(0)], 1) == 99.0  # default: any lead
