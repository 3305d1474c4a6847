"""The growth signal's integer arithmetic and the replay's quick test, against their
definitions on generated features (Hypothesis)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.rules.signals import assess_growth, could_fire, decide
from tests.evaluator.rules_support import PARAMS, features

counts = st.one_of(st.none(), st.integers(0, 10**6))


@st.composite
def cases(draw: st.DrawFn) -> tuple[CardFeatures, RuleParams]:
    k = draw(st.integers(1, 4))
    g = draw(st.sampled_from([1, 6, 24, 48]))
    b = draw(st.integers(max(1, -(-g // 24)), 14))
    ratio = draw(st.sampled_from([0.5, 1.0, 1.2, 1.6, 2.0, 2.4, 3.0, 3.7, 1.33]))
    params = replace(PARAMS, consecutive_windows=k, growth_window_hours=g, baseline_days=b,
                     ratio=ratio, min_increase=draw(st.integers(1, 64)),
                     min_samples=draw(st.integers(0, 30)))
    top = draw(st.integers(0, 10**5))
    steps = draw(st.lists(st.integers(0, 400), min_size=k, max_size=k))
    corrected: list[int | None] = [top]
    for step in steps:
        corrected.append((corrected[-1] or 0) - step)
    if draw(st.integers(0, 9)) == 0:  # now and then an unknown boundary
        corrected[draw(st.integers(0, k))] = None
    baseline = None if draw(st.integers(0, 9)) == 0 else draw(st.integers(0, top))
    f = features(tuple(corrected), baseline,
                 samples=draw(st.integers(0, 2000)), uncorrected=draw(counts),
                 remap_failure=draw(counts), remap_pending=draw(counts),
                 remap_pending_before=draw(counts), retired_pages=draw(counts),
                 retired_pages_before=draw(counts))
    return f, params


@settings(max_examples=400)
@given(cases())
def test_the_ratio_gate_is_the_exact_fraction(case: tuple[CardFeatures, RuleParams]) -> None:
    f, p = case
    a = assess_growth(f, p)
    if a.abandoned is not None or a.baseline_increase is None:
        return
    mean = Fraction(a.baseline_increase * p.growth_window_hours, p.baseline_days * 24)
    assert a.ratio_ok == (a.deltas[0] >= Fraction(str(p.ratio)) * mean)
    assert a.baseline_mean == float(mean)
    assert a.ratio == (None if mean == 0 else float(a.deltas[0] / mean))


@settings(max_examples=400)
@given(cases())
def test_could_fire_is_necessary_for_a_decision(case: tuple[CardFeatures, RuleParams]) -> None:
    f, p = case
    if decide(f, p) is not None:
        assert could_fire(f, p)
