"""The baselines the backtest replays beside every version, and how a version is compared."""

from __future__ import annotations

from typing import Any

from gpu_health.evaluator.backtest.report import compare_with_baselines
from gpu_health.evaluator.backtest.rulesets import Variant, baseline_variants
from gpu_health.evaluator.config.rules import BASELINE_FILES, load_ruleset


def entry(version: str, window: int, ff: tuple[float | None, float | None],
          rep: tuple[float | None, float | None], *, matured: int = 100,
          faulty: int = 40) -> dict[str, Any]:
    """A report row whose first-fault ratios come from counts: ``matured`` predictions and
    ``faulty`` first faults, the first ones caught."""
    hits = None if ff[0] is None else round(ff[0] * matured)
    caught = [] if ff[1] is None else [f"n{i}/0@t" for i in range(round(ff[1] * faulty))]
    return {"version": version, "window_days": window, "by_class": {
        "first_fault": {"precision": ff[0], "recall": ff[1], "matured": matured,
                        "predictions": {"hit": hits or 0}, "faulty_cards": faulty,
                        "caught": caught},
        "repeat": {"precision": rep[0], "recall": rep[1]}}}


def test_the_shipped_baselines_load_and_say_what_they_are() -> None:
    naive, repeat = (load_ruleset(path, env={}) for path in BASELINE_FILES)
    assert naive.version == "baseline-new-correctable"
    p = naive.params
    assert (p.min_increase, p.consecutive_windows, p.growth_window_hours, p.ratio) == (
        1, 1, 24, 1.0)  # any increase over the last day, no shape or ratio gate
    assert repeat.version == "baseline-repeat" and repeat.params.min_increase >= 10**9


def test_baselines_run_once_per_window_the_versions_use() -> None:
    week = Variant(load_ruleset(BASELINE_FILES[0].parents[1] / "v1-ecc-growth.yaml", env={}))
    got = baseline_variants([week])
    assert [(v.ruleset.base_version, v.ruleset.params.window_days) for v in got] == [
        ("baseline-new-correctable", 7), ("baseline-repeat", 7)]


def test_lift_comparisons_and_the_flag() -> None:
    naive = entry("naive", 7, (0.3, 0.5), (0.14, None))
    repeat = entry("repeat", 7, (None, None), (0.14, None))
    worse = entry("v1", 7, (0.05, 0.1), (0.14, None))
    compare_with_baselines(worse, [naive, repeat])
    assert worse["lift"]["naive"]["first_fault"] == {"precision": 0.1667, "recall": 0.2}
    assert worse["lift"]["repeat"]["first_fault"] == {"precision": None, "recall": None}
    assert worse["lift"]["repeat"]["repeat"]["precision"] == 1.0
    assert worse["flag"].startswith("a baseline beats it: naive beats v1 beyond chance")
    assert [c["by"] for c in worse["comparisons"]] == ["beyond_chance", "not_comparable"]
    assert worse["comparisons"][0]["differences"]["recall"]["method"] == \
        "Newcombe method 10 (paired)"
    better = entry("v9", 7, (0.3, 0.9), (0.1, None))
    compare_with_baselines(better, [naive, repeat])
    assert better["flag"] is None  # more first faults at equal precision, beyond chance
    assert better["comparisons"][0]["winner"] == "a"
    # More recall bought with less precision: neither beats the other, no reason to flag
    imprecise = entry("v8", 7, (0.05, 0.9), (0.1, None))
    compare_with_baselines(imprecise, [naive])
    assert imprecise["flag"] is None
    assert imprecise["comparisons"][0]["by"] == "neither"
    # a few points apart is chance, whatever the costs say
    costly = {**entry("v8", 7, (0.28, 0.45), (0.1, None)), "gpu_hours_saved": -5.0}
    compare_with_baselines(costly, [{**naive, "gpu_hours_saved": 12.0}])
    assert costly["flag"] is None
    assert "naive would save more GPU-hours (12 vs -5)" in costly["comparisons"][0]["reason"]
    unknown = entry("v7", 7, (None, None), (None, None))
    compare_with_baselines(unknown, [repeat])
    assert unknown["flag"].startswith("not comparable")
    alone = entry("v6", 7, (0.3, 0.5), (None, None))
    compare_with_baselines(alone, [])
    assert alone["flag"] is None and alone["comparisons"] == []
