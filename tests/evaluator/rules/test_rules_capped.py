"""The growth gates with ``cap_busiest_hours``: one burst cannot fire them (pure, Hypothesis).

A card's correctable count is a steady background (r errors an hour, r = 0: flat) plus one
burst of M errors spread anyhow inside one hour that starts anywhere, window boundaries
included. The features are read off that curve as the store reads them: C(t0 - i*g), C(t0 - B)
and C(t0 - j h) for j = 0..k*g.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.params import RuleParams, cross_problems
from gpu_health.evaluator.rules.signals import assess_growth, capped_increases, decide
from tests.evaluator.rules_support import PARAMS, START, V2_FILE, ruleset
from tests.shared import REPO

V3 = ruleset(REPO / "rules" / "v3-ecc-sustained.yaml")


def curve(rate: int, burst: list[float]) -> Callable[[float], int]:
    """C(t), t in hours before t0 (t0 = 0, the past is negative): the background counts
    whole hours since a far origin, the burst each of its events at or before t."""
    def c(t: float) -> int:
        return rate * int(t + 10_000) + sum(1 for at in burst if at <= t)

    return c


def card(c: Callable[[float], int], p: RuleParams) -> CardFeatures:
    g, k = p.growth_window_hours, p.consecutive_windows
    return CardFeatures(
        node_id="n1", gpu_index=0, gpu_uuid="GPU-1", source="real", at=START, t0=START,
        corrected=tuple(c(-i * g) for i in range(k + 1)),
        corrected_baseline=c(-p.baseline_days * 24), baseline_samples=10_000,
        hourly=tuple(c(-j) for j in range(k * g + 1)),
    )


@st.composite
def rules(draw: st.DrawFn) -> RuleParams:
    g = draw(st.integers(3, 48))
    k = draw(st.integers(1, 5))
    days = draw(st.integers(max(1, -(-g * k // 24)), 14))
    ratio = draw(st.sampled_from([0.25, 0.5, 1.0, 1.2, 1.6, 2.0, 3.0]))
    p = replace(PARAMS, growth_window_hours=g, consecutive_windows=k, baseline_days=days,
                ratio=ratio, min_increase=draw(st.integers(1, 64)), min_samples=0,
                cap_busiest_hours=draw(st.integers(2, g - 1)))
    if cross_problems(p.as_dict()):
        p = replace(p, ratio=0.5)
    return p


@settings(max_examples=400, deadline=None)
@given(p=rules(), rate=st.integers(0, 6), size=st.integers(1, 5_000),
       spread=st.lists(st.floats(0.0, 0.999_999), min_size=1, max_size=8),
       where=st.floats(0.0, 1.0))
def test_one_burst_never_fires_the_capped_gate(p: RuleParams, rate: int, size: int,
                                                 spread: list[float], where: float) -> None:
    """Anywhere in the baseline span, any size, any shape inside its hour: the capped windows
    are those of the same card without it, the signal fires only if that card fires, and a
    flat card never fires."""
    span = p.baseline_days * 24 + 1
    begin = -span + where * span  # hours before t0 where its hour starts
    burst = [begin + spread[i % len(spread)] for i in range(size)]
    with_burst = assess_growth(card(curve(rate, burst), p), p)
    without = assess_growth(card(curve(rate, []), p), p)
    assert not with_burst.fires or without.fires
    steady = capped_increases(card(curve(rate, []), p).hourly, p)
    assert capped_increases(card(curve(rate, burst), p).hourly, p) == steady
    if rate == 0:
        assert not with_burst.fires


def test_the_straddling_burst_fires_v2_and_not_v3() -> None:
    """A 178-error burst over 40 minutes across the boundary t0 - 24 h (70 before it, 108
    after), on a flat card: v2's windows read 0 < 70 < 108; v3's capped ones 0 = 0 = 0."""
    burst = [-24 - 0.3 + 0.3 * i / 70 for i in range(70)] + [
        -24 + 0.4 * i / 108 for i in range(1, 109)]
    v2 = ruleset(V2_FILE).params
    a2 = assess_growth(card(curve(0, burst), v2), v2)
    assert a2.deltas == (108, 70, 0) and a2.fires
    a3 = assess_growth(card(curve(0, burst), V3.params), V3.params)
    assert a3.capped == (0, 0, 0) and not a3.fires
    assert decide(card(curve(0, burst), V3.params), V3.params) is None


def test_a_ramp_spread_over_the_day_still_fires_v3() -> None:
    """20, 40, then 60 errors a day, spread evenly: capping the 3 busiest hours of each window
    at the 4th takes nothing from them (60, 40, 20)."""
    day0, day1, day2 = [3, 2] * 12, [2, 2, 1] * 8, [1, 1, 1, 1, 1, 0] * 4
    hours = day0 + day1 + day2  # hours[h]: errors in the hour (t0 - h - 1, t0 - h]

    def c(t: float) -> int:
        return 1_000 + sum(hours[int(-t):])

    f = card(c, V3.params)
    a = assess_growth(f, V3.params)
    assert a.deltas == (60, 40, 20) and a.capped == (60, 40, 20)
    assert a.fires
    hit = decide(f, V3.params)
    assert hit is not None and "3 busiest hours capped at its next busiest" in hit.evidence


def test_unknown_hourly_values_abandon_the_signal_never_zero() -> None:
    p = V3.params
    f = card(curve(4, []), p)
    f = replace(f, corrected=(400, 300, 250, 220), hourly=None)
    assert assess_growth(f, p).abandoned is not None
    assert "not read hour by hour" in str(capped_increases(None, p))
    hourly = list(range(1000, 1000 - (3 * 24 + 1), -1))
    hourly[5] = None  # type: ignore[call-overload]
    assert capped_increases(tuple(hourly), p) == "an hourly correctable-ECC value is unknown"
    hourly[5] = 99_999  # a reset inside the windows
    assert "went down" in str(capped_increases(tuple(hourly), p))


def test_a_small_last_window_is_judged_without_hourly_values() -> None:
    """Capping never raises an increase: below min_increase the hourly values are not read."""
    p = V3.params
    f = replace(card(curve(1, []), p), hourly=None)
    a = assess_growth(f, p)
    assert a.abandoned is None and not a.magnitude_ok and a.capped is None


@pytest.mark.parametrize(("g", "capped", "ok"), [(24, 3, True), (24, 23, True), (24, 24, False),
                                               (3, 3, False)])
def test_the_capped_hours_leave_one_to_cap_at(g: int, capped: int, ok: bool) -> None:
    values = replace(PARAMS, growth_window_hours=g, cap_busiest_hours=capped, ratio=1.0).as_dict()
    assert (not cross_problems(values)) is ok


def test_v1_and_v2_keep_their_hashes() -> None:
    """The new key is left out of the hash at its default: recorded versions stay valid."""
    assert "cap_busiest_hours" not in ruleset().params.frozen_dict()
    assert V3.params.frozen_dict()["cap_busiest_hours"] == 3
    assert V3.params.fault_xids == ruleset(V2_FILE).params.fault_xids
