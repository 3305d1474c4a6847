"""A live tick of v4-ecc-weak (the weak layer as evidence) and of v4 with ``weak_gate=require``
over the same samples (real DuckDB files): two cards ramp the same way, one of them also ran hot
for two hours of the last day; v4 predicts both and names the heat of the hot one; require
predicts the hot one only. The same for v5-ecc-weak-pcie with PCIe replays in place of the
heat, which v4 does not read, and for v6-ecc-weak-links with NVLink errors, which v5 does not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.evaluator.model import CardDetails
from gpu_health.evaluator.store import Database
from tests.evaluator.rules_support import const, load, open_db, ruleset, series
from tests.evaluator.worker.test_worker_capped import NOW, NOW_DAYS, predicted, ramp
from tests.shared import REPO

V4_FILE = REPO / "rules" / "v4-ecc-weak.yaml"
HOUR_US = 3600 * 10**6
SINCE = NOW - timedelta(hours=6)
Build = Callable[[Path, str], Database]
COOL = {"hw_thermal_slowdown_us": 0, "sw_thermal_slowdown_us": 0, "pcie_link_width": 16,
        "pcie_link_width_max": 16}


def ramping_pair(tmp_path: Path, name: str,
                 details: Callable[[int, timedelta], CardDetails]) -> Database:
    """Two cards whose correctable counts ramp the same way; ``details(gpu, elapsed)`` gives
    each row's details, ``elapsed`` the time since 6 hours before t0 (negative before)."""
    db = open_db(tmp_path, f"{name}.duckdb")
    for gpu in (0, 1):
        rows = series("n1", gpu, f"GPU-{gpu}", start=0, end=NOW_DAYS, every_minutes=10,
                      corrected=ramp, uncorrected=const(0))
        load(db, [replace(s, details=details(gpu, s.sampled_at - SINCE)) for s in rows])
    return db


def grown(gpu: int, elapsed: timedelta, unit: timedelta, most: int) -> int:
    """GPU 1's count: one per ``unit`` since 6 hours before t0, at most ``most``; GPU 0's 0."""
    return min(most, max(0, int(elapsed / unit))) if gpu == 1 else 0


def heated(tmp_path: Path, name: str) -> Database:
    """GPU 1 had two hours of hardware thermal slowdown, from 6 h before t0 to 4 h before it;
    both links at x16 of x16."""
    return ramping_pair(tmp_path, name, lambda gpu, elapsed: CardDetails(**{
        **COOL, "hw_thermal_slowdown_us": grown(gpu, elapsed, timedelta(microseconds=1),
                                                2 * HOUR_US)}))


def test_v4_names_the_heat_and_require_predicts_only_the_hot_card(tmp_path: Path) -> None:
    v4 = predicted(tmp_path, ruleset(V4_FILE), heated)
    assert set(v4) == {0, 1}
    assert "[weak]" not in v4[0]
    assert "[weak] thermal_slowdown: clocks held down for heat 120 min in the last 24h " \
           "(>= 60 min)" in v4[1]
    required = predicted(tmp_path, ruleset(V4_FILE, weak_gate="require"), heated)
    assert set(required) == {1}


V5_FILE = REPO / "rules" / "v5-ecc-weak-pcie.yaml"


def replaying(tmp_path: Path, name: str) -> Database:
    """Cool cards at x16 of x16; GPU 1's link resent 2,000 PCIe transactions in the 6 hours
    before t0, GPU 0's none since its 40 of before."""
    return ramping_pair(tmp_path, name, lambda gpu, elapsed: CardDetails(
        **COOL, pcie_replays=40 + grown(gpu, elapsed, timedelta(seconds=10), 2000)))


V6_FILE = REPO / "rules" / "v6-ecc-weak-links.yaml"


def erring(tmp_path: Path, name: str) -> Database:
    """Cool cards, x16 of x16 and quiet on PCIe; GPU 1's NVLink links logged 12 errors in the 6
    hours before t0, GPU 0's none."""
    return ramping_pair(tmp_path, name, lambda gpu, elapsed: CardDetails(
        **COOL, pcie_replays=40,
        nvlink_errors=grown(gpu, elapsed, timedelta(minutes=30), 12)))


@pytest.mark.parametrize("older, newer, build, evidence", [
    (V4_FILE, V5_FILE, replaying,
     "[weak] pcie_replays_rising: PCIe replays +2000 in the last 24h (>= 1000)"),
    (V5_FILE, V6_FILE, erring,
     "[weak] nvlink_errors_rising: NVLink errors +12 in the last 24h (>= 1)"),
])
def test_the_newer_version_names_its_signal_the_older_does_not_and_require_predicts_one_card(
        tmp_path: Path, older: Path, newer: Path, build: Build, evidence: str) -> None:
    before = predicted(tmp_path, ruleset(older), build)
    assert set(before) == {0, 1} and "[weak]" not in before[0] + before[1]  # not read
    after = predicted(tmp_path, ruleset(newer), build)
    assert set(after) == {0, 1} and "[weak]" not in after[0]
    assert evidence in after[1]
    required = predicted(tmp_path, ruleset(newer, weak_gate="require"), build)
    assert set(required) == {1}
