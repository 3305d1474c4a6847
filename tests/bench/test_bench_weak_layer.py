"""bench/weak_layer.py calibrates from the base it claims: v4-ecc-weak (heat),
v5-ecc-weak-pcie (replays) or v6-ecc-weak-links (nvlink) with min_increase 8, under its own
name (the fleets it plants are tested in tests/evaluator/calibrate)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench.weak_layer import V4, V5, V6, tuned_base
from gpu_health.evaluator.config.rules import load_ruleset


def test_the_tuned_base_is_v4_with_the_calibrated_growth_threshold(tmp_path: Path) -> None:
    tuned = load_ruleset(tuned_base(tmp_path), env={})
    v4 = load_ruleset(V4, env={})
    assert tuned.version == "v4-ecc-tuned"
    assert tuned.params == replace(v4.params, min_increase=8)


def test_the_replays_base_is_v5_with_the_same_growth_threshold(tmp_path: Path) -> None:
    tuned = load_ruleset(tuned_base(tmp_path, "replays"), env={})
    v5 = load_ruleset(V5, env={})
    assert tuned.version == "v5-ecc-tuned"
    assert tuned.params == replace(v5.params, min_increase=8)


def test_the_nvlink_base_is_v6_with_the_same_growth_threshold(tmp_path: Path) -> None:
    tuned = load_ruleset(tuned_base(tmp_path, "nvlink"), env={})
    v6 = load_ruleset(V6, env={})
    assert tuned.version == "v6-ecc-tuned"
    assert tuned.params == replace(v6.params, min_increase=8)
