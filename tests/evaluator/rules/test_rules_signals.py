"""The signal table and the reference design's worked reasoning, pinned as pure tests.

Each test of the correctable-growth signal builds the boundary values C(t0 - i*24h), i = 0..3,
and C(t0 - 7d) by hand (newest first) and checks the gates one by one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpu_health.evaluator.rules.evaluation import CardFeatures, Signal, SignalHit
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.rules.signals import SIGNALS, assess_growth, decide
from tests.evaluator.rules_support import PARAMS, features, params


def cumulative(daily: list[int], before: int = 0) -> tuple[tuple[int, ...], int]:
    """From 7 daily increments (oldest first) -> (C(t0), C(t0-1d), .., C(t0-3d)), C(t0-7d)."""
    values = [before]
    for d in daily:
        values.append(values[-1] + d)
    newest_first = tuple(reversed(values))
    return newest_first[:4], newest_first[7]


def test_defaults_are_the_reference_thresholds() -> None:
    assert (PARAMS.growth_window_hours, PARAMS.baseline_days, PARAMS.ratio) == (24, 7, 1.2)
    assert (PARAMS.min_increase, PARAMS.consecutive_windows, PARAMS.window_days) == (32, 3, 7)


def test_magnitude_gate_one_error_a_week_then_one_today() -> None:
    # Baseline: 1 error in the whole week; today 1 more. Ratio 7x (the maximum), but 1 < 32.
    corrected, baseline = cumulative([0, 0, 0, 0, 0, 0, 1], before=1)
    a = assess_growth(features(corrected, baseline), PARAMS)
    assert a.abandoned is None and a.ratio == pytest.approx(7.0)
    assert a.ratio_ok and not a.magnitude_ok and not a.fires
    assert decide(features(corrected, baseline), PARAMS) is None


def test_shape_gate_one_off_burst() -> None:
    corrected, baseline = cumulative([2, 2, 2, 2, 0, 0, 500])
    a = assess_growth(features(corrected, baseline), PARAMS)
    assert a.magnitude_ok and a.ratio_ok and not a.shape_ok
    assert decide(features(corrected, baseline), PARAMS) is None


def test_constant_rate_is_not_acceleration_even_when_the_ratio_passes() -> None:
    # 10/day until 4 days ago, then a constant 50/day: ratio 1.52 and 50 >= 32, but 50 = 50 = 50.
    corrected, baseline = cumulative([10, 10, 10, 50, 50, 50, 50])
    a = assess_growth(features(corrected, baseline), PARAMS)
    assert a.deltas == (50, 50, 50)
    assert a.magnitude_ok and a.ratio_ok and not a.shape_ok and not a.fires


def test_steady_rate_fails_the_ratio() -> None:
    corrected, baseline = cumulative([40, 41, 42, 43, 44, 45, 46])
    a = assess_growth(features(corrected, baseline), PARAMS)
    assert a.shape_ok and a.magnitude_ok and not a.ratio_ok  # 46 < 1.2 x 43


def quadratic_features(a: float, days_since_onset: int) -> CardFeatures:
    def c(t: float) -> int:
        return round(a * max(t, 0) ** 2)

    t = days_since_onset
    return features(tuple(c(t - i) for i in range(4)), c(t - 7))


def test_quadratic_ratio_is_between_1_2_and_1_4_from_day_11_to_17() -> None:
    # C(t) = a t^2: d0 = a(2T-1), 7-day mean = a(2T-7), ratio (2T-1)/(2T-7) in [0, 7].
    for t in range(11, 18):
        ratio = (2 * t - 1) / (2 * t - 7)
        assert 1.2 <= ratio <= 1.4
        a = assess_growth(quadratic_features(2.0, t), PARAMS)
        assert a.ratio == pytest.approx(ratio)
    assert (2 * 20 - 1) / (2 * 20 - 7) < 1.2  # by day 20 the curve no longer "accelerates" 20%


@pytest.mark.parametrize("day", range(11, 19))
def test_quadratic_degradation_fires(day: int) -> None:
    decision = decide(quadratic_features(2.0, day), PARAMS)
    assert decision is not None
    assert (decision.signal, decision.layer) == ("ecc_corrected_growth", "trend")
    assert "strictly increasing" in decision.evidence and f"+{2 * (2 * day - 1)}" in \
        decision.evidence


def test_ratio_three_would_make_the_growth_signal_dead_code() -> None:
    strict = params(ratio=3.0)
    assert not any(decide(quadratic_features(2.0, t), strict) for t in range(8, 40))


def test_ratio_gate_is_exact_at_the_boundary() -> None:
    # total 245 over 7 days -> mean 35/day; 1.2 x 35 = 42 exactly. 42 must pass (6/5, no float).
    corrected = (245, 203, 163, 125)
    a = assess_growth(features(corrected, 0), PARAMS)
    assert a.deltas == (42, 40, 38) and a.ratio_ok and a.fires
    a = assess_growth(features((244, 203, 163, 125), 0), PARAMS)
    assert not a.ratio_ok


def test_kunlunxin_card_with_only_uncorrectable_counts_never_fires_growth() -> None:
    kunlun = features((None, None, None, None), None, samples=0, uncorrected=0)
    a = assess_growth(kunlun, PARAMS)
    assert a.abandoned and not a.fires
    assert decide(kunlun, PARAMS) is None
    after_fault = replace(kunlun, uncorrected=2)  # it can still be predicted by a strong signal
    decision = decide(after_fault, PARAMS)
    assert decision is not None and decision.signal == "ecc_uncorrected_present"
    assert all(h.signal != "ecc_corrected_growth" for h in decision.hits)


@pytest.mark.parametrize("hole", [0, 1, 2, 3, "baseline"])
def test_unknown_boundary_abandons_growth(hole: int | str) -> None:
    corrected: list[int | None] = list(quadratic_features(2.0, 12).corrected)
    baseline: int | None = 50
    if hole == "baseline":
        baseline = None  # no history is never "grew from 0"
    else:
        corrected[int(hole)] = None
    a = assess_growth(features(tuple(corrected), baseline), PARAMS)
    assert a.abandoned == "a correctable-ECC boundary value is unknown" and not a.fires


def test_counter_reset_abandons_growth() -> None:
    a = assess_growth(features((40, 500, 300, 150), 0), PARAMS)
    assert a.abandoned and "reset" in a.abandoned and not a.fires


def test_too_few_baseline_samples_abandons_growth() -> None:
    f = replace(quadratic_features(2.0, 12), baseline_samples=PARAMS.min_samples - 1)
    assert assess_growth(f, PARAMS).abandoned
    assert assess_growth(replace(f, baseline_samples=PARAMS.min_samples), PARAMS).fires


def test_strong_signals() -> None:
    quiet = features((0, 0, 0, 0), 0)
    assert decide(quiet, PARAMS) is None
    assert decide(replace(quiet, uncorrected=0, remap_failure=0), PARAMS) is None
    d = decide(replace(quiet, uncorrected=3), PARAMS)
    assert d is not None and (d.signal, d.layer) == ("ecc_uncorrected_present", "strong")
    assert "3" in d.evidence
    d = decide(replace(quiet, remap_failure=1), PARAMS)
    assert d is not None and (d.signal, d.layer) == ("remap_failure_present", "strong")


@pytest.mark.parametrize(("attr", "signal"), [("remap_pending", "remap_pending_growth"),
                                              ("retired_pages", "retired_pages_growth")])
def test_trend_signals_need_growth_and_a_positive_value(attr: str, signal: str) -> None:
    quiet = features((0, 0, 0, 0), 0)

    def with_(before: int | None, now: int | None) -> CardFeatures:
        changes: dict[str, Any] = {attr: now, attr + "_before": before}
        return replace(quiet, **changes)

    d = decide(with_(0, 1), PARAMS)
    assert d is not None and (d.signal, d.layer) == (signal, "trend")
    assert "0 -> 1" in d.evidence
    assert decide(with_(4, 4), PARAMS) is None  # factory stock, not growth
    assert decide(with_(5, 4), PARAMS) is None
    assert decide(with_(None, 4), PARAMS) is None  # unknown before: never "grew from 0"
    assert decide(with_(4, None), PARAMS) is None


def test_strong_signal_is_primary_and_all_hits_are_kept() -> None:
    f = replace(quadratic_features(2.0, 12), uncorrected=1, remap_pending=1,
                remap_pending_before=0)
    d = decide(f, PARAMS)
    assert d is not None
    assert [h.signal for h in d.hits] == ["ecc_uncorrected_present", "ecc_corrected_growth",
                                          "remap_pending_growth"]
    assert d.layer == "strong"


def _always_weak(f: CardFeatures, p: RuleParams) -> SignalHit:
    # A check that even claims a stronger layer: the table's layer must win.
    return SignalHit("temperature_high", "strong", "temperature 90 C")


WEAK = Signal("temperature_high", "weak", _always_weak)


def test_weak_signal_can_never_trigger_alone() -> None:
    quiet = features((0, 0, 0, 0), 0)
    assert decide(quiet, PARAMS, (*SIGNALS, WEAK)) is None
    assert decide(quiet, PARAMS, (WEAK,)) is None


def test_weak_signal_supports_a_real_one() -> None:
    f = replace(features((0, 0, 0, 0), 0), uncorrected=1)
    d = decide(f, PARAMS, (WEAK, *SIGNALS))
    assert d is not None and d.layer == "strong"
    assert [(h.signal, h.layer) for h in d.hits][-1] == ("temperature_high", "weak")
