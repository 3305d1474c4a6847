"""The weak layer's PCIe replay signal (pure) and the rule file that reads it
(rules/v5-ecc-weak-pcie.yaml): off unless a version asks for it, so every older version keeps
its hash and its predictions."""

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

V4 = ruleset(REPO / "rules" / "v4-ecc-weak.yaml")
V5 = ruleset(REPO / "rules" / "v5-ecc-weak-pcie.yaml")
RISING = ((250, 130, 50, 10), 0)  # fires the trend signal at v1's thresholds


def replaying(grown: int, before: int | None = 40, **more: object) -> CardFeatures:
    """A quiet card whose PCIe replays grew by ``grown`` over the last growth window."""
    now = None if before is None else before + grown
    return replace(features((0, 0, 0, 0), 0), pcie_replays=now, pcie_replays_before=before,
                   **more)  # type: ignore[arg-type]


def weak_hits(f: CardFeatures, **p: object) -> list[str]:
    rule = params(weak_gate="evidence", **p)
    return [s.name for s in WEAK_SIGNALS if s.check(f, rule) is not None]


def test_replays_fire_at_their_threshold_and_not_when_switched_off() -> None:
    assert weak_hits(replaying(1000), weak_pcie_replays=1000) == ["pcie_replays_rising"]
    assert weak_hits(replaying(999), weak_pcie_replays=1000) == []
    assert weak_hits(replaying(10**6)) == []  # 0, the default: the signal is off


@pytest.mark.parametrize("card", [
    replaying(5000, before=None),                                       # no history
    replace(replaying(5000), pcie_replays=None),                        # unknown now
    replace(replaying(0), pcie_replays=3, pcie_replays_before=9000),    # reset in the window
])
def test_an_unknown_or_reset_count_never_fires(card: CardFeatures) -> None:
    assert weak_hits(card, weak_pcie_replays=1) == []


def test_replays_never_fire_alone_and_gate_a_trend_under_require() -> None:
    rising = replace(features(*RISING), uncorrected=0)
    require = params(weak_gate="require", weak_pcie_replays=100)
    assert decide(replaying(5000), require) is None
    assert decide(rising, require) is None
    gated = decide(replace(rising, pcie_replays=600, pcie_replays_before=100), require)
    assert gated is not None and [h.signal for h in gated.hits] == [
        "ecc_corrected_growth", "pcie_replays_rising"]
    assert "PCIe replays +500 in the last 24h (>= 100)" in gated.evidence


def test_v5_is_v4_with_the_replays_read_and_v4_keeps_its_hash() -> None:
    assert V5.params.weak_pcie_replays == 1000
    assert replace(V5.params, weak_pcie_replays=0) == V4.params
    assert "weak_pcie_replays" not in V4.params.frozen_dict()
    assert V5.params.frozen_dict()["weak_pcie_replays"] == 1000
    assert V5.params_hash != V4.params_hash


def test_a_negative_threshold_is_refused() -> None:
    with pytest.raises(ConfigError, match="weak_pcie_replays: must be between 0 and"):
        parse_ruleset(V1_FILE.read_text() + "weak_pcie_replays: -1\n", env={})
