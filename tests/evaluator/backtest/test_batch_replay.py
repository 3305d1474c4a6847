"""The shared replay (calibration's shortcut) writes exactly the rows of full replays.

A grid of versions (min_increase x ratio x consecutive_windows, plus a 30-day window, plus
versions that cap each growth window's busiest hours) over the
mixed fleet of ``backtest_support`` (growth hits and misses, a fault without precursor, a swap,
a stall, a burst, remap and retired-page growth, a remap failure, unknown counts, a flat card):
:func:`replay_versions` in one file against :func:`replay` of every version, one after the
other, in another. Every prediction row (id, t0, window, predicted_at, signal, evidence, status,
resolved_at, outcome text) is identical, and so are the rule-version rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpu_health.evaluator.backtest.backtest_run import replay_all
from gpu_health.evaluator.backtest.batch import replay_versions
from gpu_health.evaluator.backtest.rulesets import variants
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.backtest_support import V1_FILE, dump, mixed_fleet, predictions
from tests.evaluator.rules_support import at

START, END = at(-8), at(38)


def grid() -> list[RuleSet]:
    found = variants([V1_FILE], [("min_increase", ["8", "32"]), ("ratio", ["1.2", "2"]),
                                 ("consecutive_windows", ["1", "3"])])
    month = variants([V1_FILE], [("window_days", ["30"]), ("min_increase", ["8"])])
    capped = variants([V1_FILE], [("cap_busiest_hours", ["3"]), ("min_increase", ["8", "32"]),
                                   ("consecutive_windows", ["1", "3"])])
    return [v.ruleset for v in (*found, *month, *capped)]


def fleet(tmp_path: Path, name: str) -> Database:
    db = DuckDBDatabase(tmp_path / f"{name}.duckdb")
    mixed_fleet(db, every_minutes=60)
    return db


def test_shared_replay_equals_full_replays(tmp_path: Path) -> None:
    rulesets = grid()
    assert len({rs.version for rs in rulesets}) == 13
    full, shared = fleet(tmp_path, "full"), fleet(tmp_path, "shared")
    replay_all(full, rulesets, START, END)
    summaries = replay_versions(shared, rulesets, START, END)
    expected = predictions(full)
    assert len(expected) > 60
    assert {r[14] for r in expected} >= {"hit", "miss", "voided", "pending"}
    assert {r[5] for r in expected} == {rs.version for rs in rulesets}
    assert predictions(shared) == expected
    assert dump(shared, "gpu_health_rule_versions", "version") == \
        dump(full, "gpu_health_rule_versions", "version")
    assert sum(s.predictions for s in summaries) == len(expected)
    capping = {rs.version for rs in rulesets if rs.params.cap_busiest_hours}
    assert any("busiest hours" in r[12] for r in expected if r[5] in capping)
    # replayed again: the rows in the file stay as they are, none is added
    again = replay_versions(shared, rulesets, START, END)
    assert predictions(shared) == expected and sum(s.predictions for s in again) == 0
    full.close()
    shared.close()


def test_a_longer_period_goes_on_from_the_rows_of_a_shorter_one(tmp_path: Path) -> None:
    rulesets = grid()[:3]
    full, shared = fleet(tmp_path, "full"), fleet(tmp_path, "shared")
    replay_all(full, rulesets, START, END)
    replay_versions(shared, rulesets, START, at(14))
    assert predictions(shared) != predictions(full)
    replay_versions(shared, rulesets, START, END)
    assert predictions(shared) == predictions(full)
    full.close()
    shared.close()


def heat(db: Database) -> None:
    """The weak layer's columns on the mixed fleet: GPU-hit runs hot from day 9 on (two hours
    of thermal slowdown a day), GPU-miss and GPU-retired never (known 0), GPU-late's link runs
    at x8 of x16; every other card's are unknown."""
    db.execute("""
UPDATE gpu_health_samples SET
    hw_thermal_slowdown_us = CASE WHEN gpu_uuid = 'GPU-hit' THEN CAST(greatest(0,
        epoch(sampled_at) - epoch(TIMESTAMP '2026-01-10')) * 83333 AS BIGINT) ELSE 0 END,
    pcie_link_width = CASE WHEN gpu_uuid = 'GPU-late' THEN 8 ELSE 16 END,
    pcie_link_width_max = 16
WHERE gpu_uuid IN ('GPU-hit', 'GPU-miss', 'GPU-retired', 'GPU-late')""")


def test_the_weak_gate_shares_the_replay_and_only_ever_removes_trend_predictions(
        tmp_path: Path) -> None:
    """none, evidence and require of one threshold set, replayed shared and in full: the same
    rows; evidence makes none's predictions (listing the weak hits); require keeps the strong
    ones and the trend ones a weak signal backs."""
    found = variants([V1_FILE], [("weak_gate", ["none", "evidence", "require"]),
                                 ("min_increase", ["8"])])
    rulesets = [v.ruleset for v in found]
    full, shared = fleet(tmp_path, "full"), fleet(tmp_path, "shared")
    heat(full)
    heat(shared)
    replay_all(full, rulesets, START, END)
    replay_versions(shared, rulesets, START, END)
    assert predictions(shared) == predictions(full)
    gate = {rs.version: rs.params.weak_gate for rs in rulesets}
    rows: dict[str, list[tuple[Any, ...]]] = {"none": [], "evidence": [], "require": []}
    for r in predictions(full):
        rows[gate[r[5]]].append(r)
    made = {g: sorted((r[1], r[2], r[7], r[10]) for r in found) for g, found in rows.items()}
    assert made["evidence"] == made["none"]  # (node, gpu, t0, signal): the same predictions
    listed = [r[12] for r in rows["evidence"] if "[weak]" in r[12]]
    assert any("[weak] thermal_slowdown: clocks held down for heat" in e for e in listed)
    assert any("[weak] pcie_link_degraded: PCIe link x8 of x16 at t0" in e for e in listed)
    assert all("[weak]" not in r[12] for r in rows["none"])
    trend = [r for r in rows["require"] if r[11] == "trend"]
    assert trend and all("[weak]" in r[12] for r in trend)
    assert {(r[1], r[2]) for r in trend} <= {("n1", 0), ("n2", 0)}  # hot, or a degraded link
    assert len(trend) < sum(1 for r in rows["none"] if r[11] == "trend")
    strong = {g: {(r[1], r[2]) for r in found if r[11] == "strong"} for g, found in rows.items()}
    assert strong["none"] and strong["none"] <= strong["require"]  # needs no weak signal
    full.close()
    shared.close()
