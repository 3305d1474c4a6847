"""The weak layer's rising counts (pure): PCIe replays (rules/v5-ecc-weak-pcie.yaml) and the
card's NVLink errors (rules/v6-ecc-weak-links.yaml). Each is off unless a version asks for it,
so every older version keeps its hash and its predictions."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.ruleset import RuleSet, parse_ruleset
from gpu_health.evaluator.rules.signals import decide
from gpu_health.evaluator.rules.weak_signals import WEAK_SIGNALS
from tests.evaluator.rules_support import V1_FILE, features, params, ruleset
from tests.shared import REPO

RISING = ((250, 130, 50, 10), 0)  # fires the trend signal at v1's thresholds


@dataclass(frozen=True)
class Count:
    """One rising count: its feature, rule key, signal, the version that reads it first (and
    the one before), and the evidence a growth of 500 from 100 gives under threshold 100."""

    feature: str
    key: str
    signal: str
    older: RuleSet
    newer: RuleSet
    threshold: int  # the newer version's
    evidence: str

    def values(self, now: int | None, before: int | None) -> dict[str, Any]:
        """The feature at t0 and a growth window before, as ``replace`` keywords."""
        return {self.feature: now, self.feature + "_before": before}

    def card(self, grown: int, before: int | None = 40) -> CardFeatures:
        """A quiet card whose count grew by ``grown`` over the last growth window."""
        now = None if before is None else before + grown
        return replace(features((0, 0, 0, 0), 0), **self.values(now, before))


REPLAYS = Count("pcie_replays", "weak_pcie_replays", "pcie_replays_rising",
                ruleset(REPO / "rules" / "v4-ecc-weak.yaml"),
                ruleset(REPO / "rules" / "v5-ecc-weak-pcie.yaml"), 1000,
                "PCIe replays +500 in the last 24h (>= 100)")
NVLINK = Count("nvlink_errors", "weak_nvlink_errors", "nvlink_errors_rising", REPLAYS.newer,
               ruleset(REPO / "rules" / "v6-ecc-weak-links.yaml"), 1,
               "NVLink errors +500 in the last 24h (>= 100)")
COUNTS = pytest.mark.parametrize("c", [REPLAYS, NVLINK], ids=lambda c: c.feature)


def weak_hits(f: CardFeatures, **p: object) -> list[str]:
    rule = params(weak_gate="evidence", **p)
    return [s.name for s in WEAK_SIGNALS if s.check(f, rule) is not None]


@COUNTS
def test_a_count_fires_at_its_threshold_and_not_when_switched_off(c: Count) -> None:
    assert weak_hits(c.card(1000), **{c.key: 1000}) == [c.signal]
    assert weak_hits(c.card(999), **{c.key: 1000}) == []
    assert weak_hits(c.card(0), **{c.key: 1}) == []  # nothing added: quiet
    assert weak_hits(c.card(10**6)) == []  # 0, the default: the signal is off


@COUNTS
@pytest.mark.parametrize("now, before", [(5000, None),  # no history
                                         (None, 40),  # unknown now
                                         (3, 9000)])  # reset within the window
def test_an_unknown_or_reset_count_never_fires(c: Count, now: int | None,
                                               before: int | None) -> None:
    card = replace(c.card(0), **c.values(now, before))
    assert weak_hits(card, **{c.key: 1}) == []


@COUNTS
def test_a_count_never_fires_alone_and_gates_a_trend_under_require(c: Count) -> None:
    rising = replace(features(*RISING), uncorrected=0)
    require = params(weak_gate="require", **{c.key: 100})
    assert decide(c.card(5000), require) is None
    assert decide(rising, require) is None
    gated = decide(replace(rising, **c.values(600, 100)), require)
    assert gated is not None and [h.signal for h in gated.hits] == [
        "ecc_corrected_growth", c.signal]
    assert c.evidence in gated.evidence


@COUNTS
def test_the_newer_version_is_the_older_reading_one_more_count_and_the_older_keeps_its_hash(
        c: Count) -> None:
    assert getattr(c.newer.params, c.key) == c.threshold
    off: dict[str, Any] = {c.key: 0}
    assert replace(c.newer.params, **off) == c.older.params
    assert c.key not in c.older.params.frozen_dict()
    assert c.newer.params.frozen_dict()[c.key] == c.threshold
    assert c.newer.params_hash != c.older.params_hash


@COUNTS
def test_a_negative_threshold_is_refused(c: Count) -> None:
    with pytest.raises(ConfigError, match=f"{c.key}: must be between 0 and"):
        parse_ruleset(V1_FILE.read_text() + f"{c.key}: -1\n", env={})
