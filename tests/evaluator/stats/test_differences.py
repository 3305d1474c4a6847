"""Intervals for a difference of two proportions against Newcombe's published worked examples
(Statistics in Medicine 17, 1998: unpaired, Table II, method 10; paired, Table II, method 10),
and the exact McNemar test against a table computed by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_health.evaluator.stats.differences import (
    mcnemar_exact,
    paired_difference,
    unpaired_difference,
)


@pytest.mark.parametrize("x1,n1,x2,n2,low,high", [
    (56, 70, 48, 80, 0.0524, 0.3339),
    (9, 10, 3, 10, 0.1705, 0.8090),
])
def test_unpaired_published_examples(x1: int, n1: int, x2: int, n2: int, low: float,
                                     high: float) -> None:
    d = unpaired_difference(x1, n1, x2, n2)
    assert d.estimate == pytest.approx(x1 / n1 - x2 / n2)
    assert (round(d.low, 4), round(d.high, 4)) == (low, high)


@pytest.mark.parametrize("a,b,c,d,low,high", [
    (36, 12, 2, 0, 0.0569, 0.3404),
    (18, 12, 2, 18, 0.0562, 0.3290),
])
def test_paired_published_examples(a: int, b: int, c: int, d: int, low: float,
                                   high: float) -> None:
    diff = paired_difference(a, b, c, d)
    assert diff.estimate == pytest.approx((b - c) / (a + b + c + d))
    assert (round(diff.low, 4), round(diff.high, 4)) == (low, high)


def test_mcnemar_exact_by_hand() -> None:
    # 10 discordant cards, 8 caught only by the first version: P(X <= 2 | 10, 1/2) =
    # (1 + 10 + 45) / 1024 = 56/1024; two-sided 112/1024
    assert mcnemar_exact(8, 2) == pytest.approx(112 / 1024)
    assert mcnemar_exact(2, 8) == mcnemar_exact(8, 2)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 64)


def test_a_planted_chance_result_is_not_beyond_chance() -> None:
    """Precision 2/65 against 2/72 (both at recall 2/39) once counted as "dominates"."""
    assert not unpaired_difference(2, 65, 2, 72).above_zero
    assert not paired_difference(2, 0, 0, 37).above_zero


@given(st.integers(0, 60), st.integers(1, 60), st.integers(0, 60), st.integers(1, 60))
def test_unpaired_interval_holds_the_estimate_within_minus_one_to_one(
        x1: int, n1: int, x2: int, n2: int) -> None:
    x1, x2 = min(x1, n1), min(x2, n2)
    d = unpaired_difference(x1, n1, x2, n2)
    assert -1 <= d.low <= d.estimate <= d.high <= 1
    assert not math.isnan(d.low) and not math.isnan(d.high)


@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_paired_interval_holds_the_estimate(a: int, b: int, c: int, d: int) -> None:
    if a + b + c + d == 0:
        return
    diff = paired_difference(a, b, c, d)
    assert -1 <= diff.low <= diff.estimate + 1e-12 and diff.estimate <= diff.high + 1e-12
    assert diff.high <= 1
