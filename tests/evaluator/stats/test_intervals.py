"""The Wilson score interval against published values, and its null rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_health.evaluator.stats.intervals import ci95, wilson


@pytest.mark.parametrize("successes, n, low, high", [
    # Newcombe, "Two-sided confidence intervals for the single proportion: comparison of seven
    # methods", Statistics in Medicine 17 (1998), Table I, method 3 (score, no correction).
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
    (29, 29, 0.8830, 1.0),
])
def test_wilson_matches_newcombes_table(successes: int, n: int, low: float, high: float) -> None:
    got = wilson(successes, n)
    assert got is not None
    assert got[0] == pytest.approx(low, abs=5e-5) and got[1] == pytest.approx(high, abs=5e-5)


@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_interval_holds_the_point_and_stays_in_zero_one(case: tuple[int, int]) -> None:
    successes, n = case
    bounds = wilson(successes, n)
    assert bounds is not None
    assert 0.0 <= bounds[0] <= successes / n <= bounds[1] <= 1.0


def test_no_trials_no_interval_and_a_null_ratio_has_a_null_interval() -> None:
    assert wilson(0, 0) is None
    assert ci95(3, 5, None) is None  # the gates withhold the ratio: no interval either
    assert ci95(0, 0, None) is None
    assert ci95(15, 25, 0.6) == [0.407395, 0.765967]
    with pytest.raises(ValueError, match=r"within 0\.\.5"):
        wilson(6, 5)
