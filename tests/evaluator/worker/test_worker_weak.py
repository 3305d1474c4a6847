"""A live tick of v4-ecc-weak (the weak layer as evidence) and of v4 with ``weak_gate=require``
over the same samples (real DuckDB files): two cards ramp the same way, one of them also ran hot
for two hours of the last day; v4 predicts both and names the heat of the hot one; require
predicts the hot one only. The same for v5-ecc-weak-pcie with PCIe replays in place of the
heat, which v4 does not read, and for v6-ecc-weak-links with NVLink errors, which v5 does not."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from gpu_health.evaluator.model import CardDetails
from gpu_health.evaluator.store import Database
from tests.evaluator.rules_support import const, load, open_db, ruleset, series
from tests.evaluator.worker.test_worker_capped import NOW, NOW_DAYS, predicted, ramp
from tests.shared import REPO

V4_FILE = REPO / "rules" / "v4-ecc-weak.yaml"
HOUR_US = 3600 * 10**6


def heated(tmp_path: Path, name: str) -> Database:
    """Two ramping cards; GPU 1 had two hours of hardware thermal slowdown, from 6 h before t0
    to 4 h before it; both links at x16 of x16."""
    db = open_db(tmp_path, f"{name}.duckdb")
    for gpu in (0, 1):
        rows = series("n1", gpu, f"GPU-{gpu}", start=0, end=NOW_DAYS, every_minutes=10,
                      corrected=ramp, uncorrected=const(0))
        heat = [min(2 * HOUR_US, max(0, int((s.sampled_at - (NOW - timedelta(hours=6)))
                                            / timedelta(microseconds=1))))
                if gpu == 1 else 0 for s in rows]
        load(db, [replace(s, details=CardDetails(hw_thermal_slowdown_us=h,
                                                 sw_thermal_slowdown_us=0, pcie_link_width=16,
                                                 pcie_link_width_max=16))
                  for s, h in zip(rows, heat, strict=True)])
    return db


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
    """Two ramping cards, cool and at x16 of x16; GPU 1's link resent 2,000 PCIe transactions
    in the 6 hours before t0, GPU 0's none since its 40 of before."""
    db = open_db(tmp_path, f"{name}.duckdb")
    for gpu in (0, 1):
        rows = series("n1", gpu, f"GPU-{gpu}", start=0, end=NOW_DAYS, every_minutes=10,
                      corrected=ramp, uncorrected=const(0))
        start = NOW - timedelta(hours=6)
        replays = [40 + (min(2000, max(0, int((s.sampled_at - start) / timedelta(seconds=10))))
                         if gpu == 1 else 0) for s in rows]
        load(db, [replace(s, details=CardDetails(hw_thermal_slowdown_us=0,
                                                 sw_thermal_slowdown_us=0, pcie_link_width=16,
                                                 pcie_link_width_max=16, pcie_replays=r))
                  for s, r in zip(rows, replays, strict=True)])
    return db


def test_v5_names_the_replays_v4_does_not_and_require_predicts_only_that_card(
        tmp_path: Path) -> None:
    v4 = predicted(tmp_path, ruleset(V4_FILE), replaying)
    assert set(v4) == {0, 1} and "[weak]" not in v4[0] + v4[1]  # v4 does not read them
    v5 = predicted(tmp_path, ruleset(V5_FILE), replaying)
    assert set(v5) == {0, 1} and "[weak]" not in v5[0]
    assert "[weak] pcie_replays_rising: PCIe replays +2000 in the last 24h (>= 1000)" in v5[1]
    required = predicted(tmp_path, ruleset(V5_FILE, weak_gate="require"), replaying)
    assert set(required) == {1}


V6_FILE = REPO / "rules" / "v6-ecc-weak-links.yaml"


def erring(tmp_path: Path, name: str) -> Database:
    """Two ramping cards, cool, x16 of x16 and quiet on PCIe; GPU 1's NVLink links logged 12
    errors in the 6 hours before t0, GPU 0's none."""
    db = open_db(tmp_path, f"{name}.duckdb")
    for gpu in (0, 1):
        rows = series("n1", gpu, f"GPU-{gpu}", start=0, end=NOW_DAYS, every_minutes=10,
                      corrected=ramp, uncorrected=const(0))
        start = NOW - timedelta(hours=6)
        errors = [min(12, max(0, int((s.sampled_at - start) / timedelta(minutes=30))))
                  if gpu == 1 else 0 for s in rows]
        load(db, [replace(s, details=CardDetails(hw_thermal_slowdown_us=0,
                                                 sw_thermal_slowdown_us=0, pcie_link_width=16,
                                                 pcie_link_width_max=16, pcie_replays=40,
                                                 nvlink_errors=e))
                  for s, e in zip(rows, errors, strict=True)])
    return db


def test_v6_names_the_nvlink_errors_v5_does_not_and_require_predicts_only_that_card(
        tmp_path: Path) -> None:
    v5 = predicted(tmp_path, ruleset(V5_FILE), erring)
    assert set(v5) == {0, 1} and "[weak]" not in v5[0] + v5[1]  # v5 does not read them
    v6 = predicted(tmp_path, ruleset(V6_FILE), erring)
    assert set(v6) == {0, 1} and "[weak]" not in v6[0]
    assert "[weak] nvlink_errors_rising: NVLink errors +12 in the last 24h (>= 1)" in v6[1]
    required = predicted(tmp_path, ruleset(V6_FILE, weak_gate="require"), erring)
    assert set(required) == {1}
