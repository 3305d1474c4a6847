"""Benchmark: ``gpu-health-evaluator calibrate`` with the default 48-candidate space.

Two runs, each timed end to end through the command (replays, both parts' statistics, report):

1. a synthetic fleet of 200 cards observed for 150 days with a planted precursor
   (:mod:`tests.evaluator.calibrate_support`: two-week correctable-error ramps before most
   faults, noisy cards with bursts, sudden faults; readings every minute, the live write rule's
   rows: about 8.7 M), read with ``--db`` (target < 5 minutes). Beside it, measured in the same
   run on a copy of the same file, the reference: a full tick-by-tick replay
   (:func:`gpu_health.evaluator.backtest.replay.replay`) of the base version alone, so the printed
   ratio says what the shared replay saves per candidate whatever the machine's speed today;
   then the same calibration from ``rules/v3-ecc-sustained.yaml`` (the trend signal whose windows
   leave out their busiest hours), on the same file;
2. the public Calchas HBM dataset (../shared/datasets/calchas/hbm-errors.csv) through
   ``--events --preset calchas`` (target < 2 minutes).

    python -m bench.calibrate            # both
    python -m bench.calibrate --quick    # 64 cards x 60 days, and Calchas
    python -m bench.calibrate --reports DIR   # also keep the JSON reports in DIR
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpu_health.evaluator.backtest.backtest_run import replay_all
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.main import main as evaluator_main
from gpu_health.evaluator.store.history.backtest import open_backtest
from tests.evaluator.calibrate_support import START, precursor_fleet, write_fleet
from tests.shared import REPO, SHARED

V1 = REPO / "rules" / "v1-ecc-growth.yaml"
V3 = REPO / "rules" / "v3-ecc-sustained.yaml"
CALCHAS = SHARED / "datasets" / "calchas" / "hbm-errors.csv"
STEP = timedelta(minutes=1)


def calibrate(argv: list[str], output: Path) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the report's text: in the JSON too
        code = evaluator_main(["calibrate", *argv, "--output", str(output), "--no-progress",
                               "--log.level", "warn"])
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"calibrate exited {code}")
    return seconds, json.loads(output.read_text())


def reference(path: Path, days: int) -> float:
    """A full replay of v1 alone over the same history (a copy of the file)."""
    db = open_backtest(path, live=(), importing=False)
    try:
        started = time.perf_counter()
        replay_all(db, [load_ruleset(V1, env={})], START, START + timedelta(days=days))
        return time.perf_counter() - started
    finally:
        db.close()


def synthetic(tmp: Path, cards: int, days: int) -> tuple[float, str]:
    started = time.perf_counter()
    _, profiles = precursor_fleet(cards, days, step=STEP)
    path = tmp / "fleet.duckdb"
    rows = write_fleet(path, cards, days, step=STEP)
    print(f"synthetic fleet {cards} cards x {days} days {profiles}: {rows:,} rows written in "
          f"{time.perf_counter() - started:.1f} s")
    shutil.copy(path, tmp / "reference.duckdb")
    full = reference(tmp / "reference.duckdb", days)
    seconds, report = calibrate(["--db", str(path), "--rules", str(V1)], tmp / "fleet.json")
    replayed = report["search"]["candidates"] + len(report["baselines"])
    per = seconds / replayed
    print(f"reference: full replay of v1 alone {full:.1f} s")
    print(f"calibrate (default space, {report['search']['candidates']} candidates + "
          f"{len(report['baselines'])} baselines): {seconds:.1f} s end to end, {per:.2f} s per "
          f"version = {per / full:.3f} x a full replay ({full * replayed / seconds:.1f}x faster "
          f"than {replayed} full replays); target < 300 s")
    print(f"verdict: {report['verdict']['status']}: {report['verdict']['reason']}")
    took, v3 = calibrate(["--db", str(path), "--rules", str(V3)], tmp / "fleet-v3.json")
    chosen = v3["chosen"]
    print(f"calibrate from v3-ecc-sustained: {took:.1f} s; verdict {v3['verdict']['status']}: "
          f"{v3['verdict']['reason']}; chosen changes "
          f"{None if chosen is None else chosen['changes']}")
    return seconds, report["verdict"]["status"]


def calchas(tmp: Path) -> float | None:
    if not CALCHAS.exists():
        print(f"Calchas dataset not found at {CALCHAS}: skipped")
        return None
    seconds, report = calibrate(["--events", str(CALCHAS), "--preset", "calchas",
                                 "--db", str(tmp / "calchas.duckdb")], tmp / "calchas.json")
    print(f"Calchas, default space ({report['search']['candidates']} candidates): "
          f"{seconds:.1f} s end to end; target < 120 s")
    print(f"verdict: {report['verdict']['status']}: {report['verdict']['reason']}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cards", type=int, default=200)
    parser.add_argument("--days", type=int, default=150)
    parser.add_argument("--skip-calchas", action="store_true")
    parser.add_argument("--reports", type=Path, help="copy the JSON reports into this folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    cards, days = (64, 60) if args.quick else (args.cards, args.days)
    missed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpu-health-calibrate-") as tmp:
        seconds, _ = synthetic(Path(tmp), cards, days)
        if seconds >= 300:
            missed.append(f"synthetic {seconds:.0f} s >= 300 s")
        if not args.skip_calchas:
            took = calchas(Path(tmp))
            if took is not None and took >= 120:
                missed.append(f"Calchas {took:.0f} s >= 120 s")
        if args.reports is not None:
            args.reports.mkdir(parents=True, exist_ok=True)
            for report in Path(tmp).glob("*.json"):
                shutil.copy(report, args.reports / report.name)
    print("targets met" if not missed else "TARGET MISSED: " + "; ".join(missed))
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
