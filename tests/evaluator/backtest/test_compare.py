"""Which of two versions beats the other beyond chance, and the cost formula (pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpu_health.evaluator.backtest.compare import Costs, Point, compare, gpu_hours_saved

FAULTS = [f"n{i}/0@t" for i in range(40)]


def point(name: str, hits: int, matured: int, caught: int | range, *, faulty: int = 40,
          saved: float | None = None, definition: tuple[int, ...] = ()) -> Point:
    """A version with ``hits`` of ``matured`` predictions right and the first ``caught`` of
    ``faulty`` faults caught (or exactly the faults of a range)."""
    held = FAULTS[caught.start:caught.stop] if isinstance(caught, range) else FAULTS[:caught]
    return Point(name, hits / matured if matured else None, len(held) / faulty if faulty else
                 None, saved, hits=hits, matured=matured, faulty=faulty,
                 caught=frozenset(held), definition=definition)


@pytest.mark.parametrize("a, b, winner, by", [
    (point("A", 30, 100, 30), point("B", 30, 100, 10), "a", "beyond_chance"),  # recall
    (point("A", 60, 100, 20), point("B", 20, 100, 20), "a", "beyond_chance"),  # precision
    (point("A", 20, 100, 10), point("B", 60, 100, 30), "b", "beyond_chance"),
    # a trade, each beyond chance: no silent winner
    (point("A", 60, 100, 10), point("B", 10, 100, 35), None, "neither"),
    (point("A", 30, 100, 20), point("B", 30, 100, 20), None, "neither"),  # equal
    # precision 2/65 against 2/72 at the same recall 2/39 once "dominated": chance
    (point("A", 2, 65, 2, faulty=39), point("B", 2, 72, 2, faulty=39), None, "neither"),
    (point("A", 0, 0, 20), point("B", 30, 100, 20), None, "not_comparable"),
])
def test_beyond_chance(a: Point, b: Point, winner: str | None, by: str) -> None:
    got = compare(a, b)
    assert (got.winner, got.by) == (winner, by), got.reason


def test_recall_is_paired_on_the_same_faults_and_unpaired_across_definitions() -> None:
    # the same 40 faults; A catches 0-11, B catches 4-11: 4 discordant, all A's
    a, b = point("A", 30, 100, range(0, 12)), point("B", 30, 100, range(4, 12))
    got = compare(a, b)
    assert got.recall is not None and got.recall.method == "Newcombe method 10 (paired)"
    assert got.mcnemar_p == pytest.approx(2 / 16)  # 4 of 4 discordant: 2 x 1/16
    assert got.winner is None  # four cards are not beyond chance
    other = compare(a, point("B", 30, 100, range(4, 12), definition=(48,)))
    assert other.recall is not None and other.recall.method == \
        "Newcombe hybrid score (unpaired)" and other.mcnemar_p is None
    document = got.as_dict()["differences"]
    assert document["recall"]["estimate"] == 0.1 and len(document["recall"]["ci95"]) == 2
    assert "exact McNemar p = 0.125" in got.reason


def test_a_paired_recall_needs_the_exact_test_too() -> None:
    """Five discordant cards all one way, of 28 (a null fleet's calibration): Newcombe's paired
    interval excludes 0, the exact McNemar test does not reject (p = 0.0625): not beyond
    chance. Six all one way (p = 0.031) is."""
    base = point("base", 4, 25, range(0, 4), faulty=28)
    five = compare(point("A", 9, 75, range(0, 9), faulty=28), base)
    assert five.recall is not None and five.recall.above_zero
    assert five.mcnemar_p == pytest.approx(0.0625)
    assert (five.winner, five.by) == (None, "neither"), five.reason
    six = compare(point("A", 10, 75, range(0, 10), faulty=28), base)
    assert six.mcnemar_p == pytest.approx(2 / 64) and six.winner == "a", six.reason


def test_costs_are_said_but_decide_nothing() -> None:
    tuned = point("tuned", 21, 100, 29, saved=400.0)
    naive = point("naive", 3, 100, 31, saved=-900.0)
    got = compare(tuned, naive)
    assert (got.winner, got.by) == ("a", "beyond_chance")  # precision, recall not worse
    close = compare(point("x", 30, 100, 20, saved=10.0**6), point("y", 31, 100, 21, saved=0.0))
    assert close.winner is None and "x would save more GPU-hours (1e+06 vs 0)" in close.reason
    assert "decides nothing" in close.reason


def test_gpu_hours_saved() -> None:
    costs = Costs(failure=512.0, mitigation=8.0, mitigation_time=timedelta(hours=2))
    leads = [timedelta(days=5), timedelta(hours=2), timedelta(minutes=30)]
    # two faults warned at least 2 h ahead x 512 - 40 predictions x 8
    assert gpu_hours_saved(costs, leads, 40) == 2 * 512 - 40 * 8
    assert gpu_hours_saved(costs, [], 3) == -24.0  # predictions that saved nothing cost
    assert gpu_hours_saved(None, leads, 40) is None  # no costs: unknown, never 0
    assert gpu_hours_saved(Costs(100.0, 1.0), [timedelta(0)], 1) == 99.0  # default: any lead
