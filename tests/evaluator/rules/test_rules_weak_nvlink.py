"""The weak layer's NVLink error signal (pure) and the rule file that reads it
(rules/v6-ecc-weak-links.yaml): off unless a version asks for it, so every older version keeps
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

V5 = ruleset(REPO / "rules" / "v5-ecc-weak-pcie.yaml")
V6 = ruleset(REPO / "rules" / "v6-ecc-weak-links.yaml")
RISING = ((250, 130, 50, 10), 0)  # fires the trend signal at v1's thresholds


def erring(grown: int, before: int | None = 0) -> CardFeatures:
    """A quiet card whose NVLink errors grew by ``grown`` over the last growth window."""
    now = None if before is None else before + grown
    return replace(features((0, 0, 0, 0), 0), nvlink_errors=now, nvlink_errors_before=before)


def weak_hits(f: CardFeatures, **p: object) -> list[str]:
    rule = params(weak_gate="evidence", **p)
    return [s.name for s in WEAK_SIGNALS if s.check(f, rule) is not None]


def test_errors_fire_at_their_threshold_and_not_when_switched_off() -> None:
    assert weak_hits(erring(1), weak_nvlink_errors=1) == ["nvlink_errors_rising"]
    assert weak_hits(erring(9), weak_nvlink_errors=10) == []
    assert weak_hits(erring(0), weak_nvlink_errors=1) == []  # none added: a quiet link
    assert weak_hits(erring(10**6)) == []  # 0, the default: the signal is off


@pytest.mark.parametrize("card", [
    erring(50, before=None),                                         # no history
    replace(erring(50), nvlink_errors=None),                         # unknown now
    replace(erring(0), nvlink_errors=3, nvlink_errors_before=900),   # reset in the window
])
def test_an_unknown_or_reset_count_never_fires(card: CardFeatures) -> None:
    assert weak_hits(card, weak_nvlink_errors=1) == []


def test_errors_never_fire_alone_and_gate_a_trend_under_require() -> None:
    rising = replace(features(*RISING), uncorrected=0)
    require = params(weak_gate="require", weak_nvlink_errors=1)
    assert decide(erring(5000), require) is None
    assert decide(rising, require) is None
    gated = decide(replace(rising, nvlink_errors=7, nvlink_errors_before=2), require)
    assert gated is not None and [h.signal for h in gated.hits] == [
        "ecc_corrected_growth", "nvlink_errors_rising"]
    assert "NVLink errors +5 in the last 24h (>= 1)" in gated.evidence


def test_v6_is_v5_with_the_nvlink_errors_read_and_v5_keeps_its_hash() -> None:
    assert V6.params.weak_nvlink_errors == 1
    assert replace(V6.params, weak_nvlink_errors=0) == V5.params
    assert "weak_nvlink_errors" not in V5.params.frozen_dict()
    assert V6.params.frozen_dict()["weak_nvlink_errors"] == 1
    assert V6.params_hash != V5.params_hash


def test_a_negative_threshold_is_refused() -> None:
    with pytest.raises(ConfigError, match="weak_nvlink_errors: must be between 0 and"):
        parse_ruleset(V1_FILE.read_text() + "weak_nvlink_errors: -1\n", env={})
