"""A live tick of v3-ecc-sustained (growth windows with their busiest hours capped), next to
v2-ecc-xid over the same samples (real DuckDB files): the one-off burst that straddles the
boundary a day before t0 fires v2 and not v3; a ramp spread over the day fires both."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.worker import Worker
from tests.evaluator.rules_support import V2_FILE, at, const, load, open_db, ruleset, series
from tests.shared import REPO

NOW = at(12) + timedelta(minutes=10)
NOW_DAYS = 12 + 10 / 1440
V3_FILE = REPO / "rules" / "v3-ecc-sustained.yaml"


def burst(t: float) -> int:
    """178 errors over 40 minutes, 15 of them before the boundary t0 - 24 h."""
    start = NOW_DAYS - 1 - 15 / 1440
    return math.floor(178 * min(1.0, max(0.0, (t - start) / (40 / 1440))))


def ramp(t: float) -> int:
    """20, 40, then 60 errors a day over the last three days, at an even pace."""
    u = NOW_DAYS - t  # days before t0
    return math.floor(sum(rate * max(0.0, hi - max(u, lo))
                          for lo, hi, rate in ((0, 1, 60), (1, 2, 40), (2, 3, 20))))


def fleet(tmp_path: Path, name: str) -> Database:
    db = open_db(tmp_path, f"{name}.duckdb")
    load(db, *(series("n1", gpu, f"GPU-{gpu}", start=0, end=NOW_DAYS, every_minutes=10,
                      corrected=curve, uncorrected=const(0))
               for gpu, curve in ((0, burst), (1, ramp))))
    return db


def predicted(tmp_path: Path, rules: RuleSet,
              build: Callable[[Path, str], Database] = fleet) -> dict[int, str]:
    """Evidence by GPU of the predictions one tick of ``rules`` makes at NOW over ``build``'s
    samples."""
    db = build(tmp_path, rules.version)
    report = Worker(db, rules, lambda: NOW).tick(NOW)
    db.close()
    return {p.gpu_index: p.evidence for p in report.predictions}


def test_the_burst_fires_v2_only_and_the_ramp_both(tmp_path: Path) -> None:
    v2 = predicted(tmp_path, ruleset(V2_FILE))
    assert set(v2) == {0, 1}
    assert "0 < 66 < 112" in v2[0]
    v3 = predicted(tmp_path, ruleset(V3_FILE))
    assert set(v3) == {1}
    assert "3 busiest hours capped at its next busiest" in v3[1]
    assert "(capped): 20 < 40 < 60" in v3[1]
