"""The weak layer (pure): its two signals, how ``weak_gate`` lets them take part, and the rule
file that reads them (rules/v4-ecc-weak.yaml). Weak signals never make a prediction alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.ruleset import parse_ruleset
from gpu_health.evaluator.rules.signals import decide
from gpu_health.evaluator.rules.weak_signals import WEAK_SIGNALS
from tests.evaluator.rules_support import V1_FILE, features, params, ruleset
from tests.shared import REPO

V3 = ruleset(REPO / "rules" / "v3-ecc-sustained.yaml")
V4 = ruleset(REPO / "rules" / "v4-ecc-weak.yaml")
MINUTE_US = 60_000_000
# A growth that fires the trend signal at v1's thresholds: 10, 40, 80, 120 a day.
RISING = ((250, 130, 50, 10), 0)


def hot(minutes: float, **more: int | None) -> CardFeatures:
    """A quiet card whose hardware thermal slowdown grew by ``minutes`` over the last window."""
    return replace(features((0, 0, 0, 0), 0), hw_thermal_slowdown_us=int(minutes * MINUTE_US)
                   + 5, hw_thermal_slowdown_us_before=5, **more)  # type: ignore[arg-type]


def weak_hits(f: CardFeatures, **p: object) -> list[str]:
    rule = params(weak_gate="evidence", **p)
    return [s.name for s in WEAK_SIGNALS if s.check(f, rule) is not None]


def test_thermal_slowdown_fires_at_its_minutes_and_counts_both_reasons() -> None:
    assert weak_hits(hot(60)) == ["thermal_slowdown"]
    assert weak_hits(hot(59.9)) == []
    assert weak_hits(hot(30, sw_thermal_slowdown_us=31 * MINUTE_US,
                         sw_thermal_slowdown_us_before=MINUTE_US)) == ["thermal_slowdown"]
    assert weak_hits(hot(10), weak_slowdown_minutes=10) == ["thermal_slowdown"]


@pytest.mark.parametrize("change", [
    {"hw_thermal_slowdown_us_before": None},   # an end unknown: no history, never "from 0"
    {"hw_thermal_slowdown_us": None},
    {"hw_thermal_slowdown_us_before": 10**15},  # went down: the driver reloaded
])
def test_an_unknown_or_restarted_slowdown_never_fires(change: dict[str, int | None]) -> None:
    assert weak_hits(replace(hot(600), **change)) == []  # type: ignore[arg-type]


def test_a_link_with_fewer_lanes_than_it_can_is_degraded() -> None:
    quiet = features((0, 0, 0, 0), 0)
    assert weak_hits(replace(quiet, pcie_link_width=8, pcie_link_width_max=16)) == [
        "pcie_link_degraded"]
    assert weak_hits(replace(quiet, pcie_link_width=16, pcie_link_width_max=16)) == []
    assert weak_hits(replace(quiet, pcie_link_width=8)) == []  # max unknown


@pytest.mark.parametrize("gate", ["none", "evidence", "require"])
def test_weak_signals_never_fire_alone(gate: str) -> None:
    card = replace(hot(600), pcie_link_width=1, pcie_link_width_max=16)
    assert decide(card, params(weak_gate=gate)) is None


def test_none_does_not_read_them_and_evidence_lists_them_beside_the_same_decision() -> None:
    card = replace(hot(90), corrected=RISING[0], corrected_baseline=RISING[1])
    plain = decide(card, params())
    listed = decide(card, params(weak_gate="evidence"))
    assert plain is not None and listed is not None
    assert [h.signal for h in plain.hits] == ["ecc_corrected_growth"]
    assert [(h.signal, h.layer) for h in listed.hits] == [
        ("ecc_corrected_growth", "trend"), ("thermal_slowdown", "weak")]
    assert "clocks held down for heat 90 min in the last 24h (>= 60 min)" in listed.evidence


def test_require_gates_trend_decisions_only() -> None:
    rising = replace(features(*RISING), uncorrected=0)
    require = params(weak_gate="require")
    assert decide(rising, require) is None  # a trend without a weak signal
    with_weak = decide(replace(rising, pcie_link_width=8, pcie_link_width_max=16), require)
    assert with_weak is not None and with_weak.signal == "ecc_corrected_growth"
    strong = decide(replace(rising, uncorrected=1), require)
    assert strong is not None and strong.layer == "strong"  # a strong signal needs none


def test_v4_is_v3_with_the_weak_layer_as_evidence() -> None:
    assert (V4.params.weak_gate, V4.params.weak_slowdown_minutes) == ("evidence", 60)
    assert replace(V4.params, weak_gate="none") == V3.params
    assert V4.params.frozen_dict()["weak_gate"] == "evidence"


def test_older_versions_keep_their_hashes() -> None:
    for rs in (ruleset(), V3):
        assert "weak_gate" not in rs.params.frozen_dict()
        assert "weak_slowdown_minutes" not in rs.params.frozen_dict()


def test_a_gate_nobody_defined_is_refused_with_the_others() -> None:
    text = V1_FILE.read_text().replace("stats_min_observed_days: 8",
                                       "stats_min_observed_days: 8\nweak_gate: off\n"
                                       "weak_slowdown_minutes: 0")
    with pytest.raises(ConfigError) as e:
        parse_ruleset(text, env={})
    message = str(e.value)
    assert "weak_gate: must be text, got False (a bare off reads as false)" in message
    assert "weak_slowdown_minutes: must be between 1 and 1440" in message


def test_the_gate_can_be_overridden_and_forks_the_version() -> None:
    rs = ruleset(REPO / "rules" / "v4-ecc-weak.yaml", weak_gate="require")
    assert rs.params.weak_gate == "require"
    assert rs.version.startswith("v4-ecc-weak+p")
    with pytest.raises(ConfigError, match="weak_gate: must be one of none, evidence, require"):
        parse_ruleset(V1_FILE.read_text() + "weak_gate: sometimes\n", env={})
