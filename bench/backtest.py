"""Benchmark: ``gpu-health-evaluator backtest`` end to end (import, replay, report).

Two runs, both timed from the input to the printed report:

1. the public Calchas HBM dataset (../shared/datasets/calchas/hbm-errors.csv, 20,391 events of
   51 devices over 669 days) through the command itself, with ``rules/v1-ecc-growth.yaml``
   (target < 30 s); ``--sweep`` adds the 30-day window as a second version;
2. a synthetic fleet of 4,096 cards observed for 90 days (target < 5 minutes). Each card's error
   events come from a seeded generator (most cards quiet, some with sporadic correctable errors,
   some degrading quadratically with or without a later uncorrectable error, some failing
   without warning, a few one-off bursts); the events become counter histories with the same
   code as an events file (:func:`gpu_health.evaluator.backtest.card_history.history`) and
   rows through the same closed form of the write rule, 288 rows per card and day (change-only
   plus 5-minute keep-alive rows: about 106 M rows). Then the same replay and report as the command.

    python -m bench.backtest            # both
    python -m bench.backtest --quick    # Calchas, and 512 synthetic cards x 30 days
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpu_health.evaluator.backtest.backtest_run import replay_all
from gpu_health.evaluator.backtest.card_history import CardHistory
from gpu_health.evaluator.backtest.events import Kind
from gpu_health.evaluator.backtest.history import write_histories
from gpu_health.evaluator.backtest.report import build_report, render_text
from gpu_health.evaluator.backtest.rulesets import variants
from gpu_health.evaluator.main import main as evaluator_main
from gpu_health.evaluator.store.history.backtest import open_backtest, start_run
from tests.evaluator.calibrate_support import fleet_histories
from tests.shared import REPO, SHARED

V1 = REPO / "rules" / "v1-ecc-growth.yaml"
CALCHAS = SHARED / "datasets" / "calchas" / "hbm-errors.csv"
START = datetime(2026, 1, 1, tzinfo=UTC)
STEP = timedelta(minutes=1)
KEEPALIVE = timedelta(minutes=5)


def _poisson_times(rng: random.Random, rate_per_day: float, start: float,
                   end: float) -> list[float]:
    times: list[float] = []
    t = start
    while rate_per_day > 0:
        t += rng.expovariate(rate_per_day)
        if t >= end:
            return times
        times.append(t)
    return times


def _quadratic(rng: random.Random, a: float, onset: float, end: float) -> list[float]:
    """Event times of a cumulative count floor(a * (t - onset)^2) after ``onset``."""
    n = int(a * (end - onset) ** 2)
    return [onset + (k / a) ** 0.5 + rng.uniform(0, 1e-4) for k in range(1, n + 1)]


def card_events(c: int, days: float, seed: int) -> tuple[str, list[tuple[float, Kind]]]:
    """(profile, [(day, kind)]) of card ``c``; profiles by a fixed hash of the card number."""
    rng = random.Random(seed * 1_000_003 + c)
    h = (c * 7919) % 1000
    onset = rng.uniform(5, days - 25)
    if h < 850:
        return "quiet", []
    if h < 950:
        return "sporadic", [(t, "corrected") for t in _poisson_times(rng, 0.5, 0, days)]
    if h < 985:
        a = rng.uniform(2, 5)
        stop = min(days, onset + rng.uniform(14, 20))
        events: list[tuple[float, Kind]] = [(t, "corrected")
                                            for t in _quadratic(rng, a, onset, stop)]
        if h < 970:  # degrades, then fails
            events.append((onset + rng.uniform(11, 16), "uncorrected"))
            return "degrading-fails", events
        return "degrading", events
    if h < 995:
        return "sudden", [(t, "uncorrected") for t in
                          sorted(rng.uniform(onset, days) for _ in range(rng.randint(1, 3)))]
    at = rng.uniform(onset, days)
    return "burst", [(at + k / 86400, "corrected") for k in range(500)]


def synthetic_fleet(cards: int, days: int, seed: int = 7) -> tuple[list[CardHistory],
                                                                   dict[str, int]]:
    """Histories of ``cards`` cards on 8-GPU nodes, all observed for ``days`` days."""
    return fleet_histories(card_events, cards, days, step=STEP, seed=seed, start=START)


def run_calchas(db_dir: Path, sweep: bool) -> float | None:
    if not CALCHAS.exists():
        print(f"Calchas dataset not found at {CALCHAS}: skipped")
        return None
    argv = ["backtest", "--events", str(CALCHAS), "--preset", "calchas", "--rules", str(V1),
            "--db", str(db_dir / f"calchas-{int(sweep)}.duckdb"), "--no-progress",
            "--no-baselines",  # the target is for the versions; baselines cost one replay each
            "--log.level", "warn"]
    if sweep:
        argv += ["--sweep", "window_days=7,30"]
    started = time.perf_counter()
    code = evaluator_main(argv)
    seconds = time.perf_counter() - started
    print(f"Calchas end to end{' (--sweep window_days=7,30)' if sweep else ''}: {seconds:.1f} s "
          f"(target < 30 s), exit {code}")
    return seconds


def run_synthetic(db_dir: Path, cards: int, days: int) -> float:
    started = time.perf_counter()
    histories, profiles = synthetic_fleet(cards, days)
    found = variants([V1], [])
    db = open_backtest(db_dir / "synthetic.duckdb", live=(), importing=True)
    start_run(db, now=datetime.now(UTC), kind="synthetic", source=None, options={})
    rows = write_histories(db, histories, step=STEP, keepalive=KEEPALIVE)
    imported = time.perf_counter()
    print(f"synthetic fleet {cards} cards x {days} days {profiles}: {rows:,} rows written in "
          f"{imported - started:.1f} s")
    since, until = START, START + timedelta(days=days)
    [summary] = replay_all(db, [found[0].ruleset], since, until)
    replayed = time.perf_counter()
    print(f"replay {summary.version}: {replayed - imported:.1f} s, {summary.ticks} ticks, "
          f"{summary.evaluated_ticks} evaluated, {summary.backfill_ticks} backfills, "
          f"{summary.predictions} predictions, replayed on {summary.cards} cards")
    report = build_report(db, found, [summary], input_info={"kind": "synthetic"}, since=since,
                          until=until, generated_at=datetime.now(UTC), database="synthetic")
    db.close()
    total = time.perf_counter() - started
    print(f"report: {time.perf_counter() - replayed:.1f} s")
    sys.stdout.write(render_text(report))
    print(f"synthetic end to end: {total:.1f} s (target < 300 s)")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cards", type=int, default=4096)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--skip-calchas", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    cards, days = (512, 30) if args.quick else (args.cards, args.days)
    ok = True
    with tempfile.TemporaryDirectory(prefix="gpu-health-backtest-") as tmp:
        if not args.skip_calchas:
            for sweep in (False, True):
                seconds = run_calchas(Path(tmp), sweep)
                ok &= seconds is None or sweep or seconds < 30
        if not args.skip_synthetic:
            ok &= run_synthetic(Path(tmp), cards, days) < 300
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
