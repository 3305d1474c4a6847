"""Measurement: the growth signal with and without its windows' busiest hours, on bait.

A seeded *bait fleet* (:func:`tests.evaluator.calibrate_support.bait_events`): ramping cards
that fail (steep enough for v1's thresholds), sudden faults, and two kinds of bait that never
fail: bursty cards (bursts of 30-300 errors within an hour on a near-flat background) and steady
cards (40-120 errors a day at a constant rate). ``gpu-health-evaluator backtest`` replays
``v1-ecc-growth``, ``v2-ecc-xid`` (v1's predictions, judged with memory XIDs too: the same here,
the fleet has none) and ``v3-ecc-sustained`` (v2 with ``cap_busiest_hours: 3``) over it.

Prints each version's first-fault precision and recall with their Wilson intervals, the
signal of its predictions by card profile, and the comparison of v3 with v2 beyond chance
(the same faults: paired recall).

    python -m bench.trend_bait                 # 240 cards x 120 days
    python -m bench.trend_bait --cards 96 --days 60
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpu_health.evaluator.backtest.compare import compare
from gpu_health.evaluator.backtest.report import point
from gpu_health.evaluator.main import main as evaluator_main
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.calibrate_support import bait_events, write_profiled_fleet
from tests.shared import REPO

RULES = [REPO / "rules" / f"{v}.yaml" for v in ("v1-ecc-growth", "v2-ecc-xid",
                                                "v3-ecc-sustained")]
STEP = timedelta(minutes=5)


def write_bait_fleet(path: Path, cards: int, days: int, seed: int) -> dict[str, int]:
    return write_profiled_fleet(path, bait_events, cards, days, step=STEP, seed=seed)[1]


def by_profile(path: Path, cards: int, days: int, seed: int) -> dict[str, Counter[str]]:
    """Per version, its predictions by (card profile, status)."""
    names = {(f"node-{c // 8:04d}", c % 8): bait_events(c, days, seed)[0] for c in range(cards)}
    db = DuckDBDatabase(path)
    try:
        rows = db.fetchall("SELECT rule_version, node_id, gpu_index, status "
                           "FROM gpu_health_predictions WHERE rule_version NOT LIKE 'baseline%'",
                           {})
    finally:
        db.close()
    out: dict[str, Counter[str]] = {}
    for version, node, gpu, status in rows:
        out.setdefault(str(version), Counter())[f"{names[(str(node), int(gpu))]} {status}"] += 1
    return out


def _ci(stats: dict[str, Any], key: str) -> str:
    value, ci = stats[key], stats[f"{key}_ci95"]
    return "null" if value is None else f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cards", type=int, default=240)
    parser.add_argument("--days", type=int, default=120)
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="gpu-health-bait-") as tmp:
        path, output = Path(tmp) / "bait.duckdb", Path(tmp) / "report.json"
        started = time.perf_counter()
        profiles = write_bait_fleet(path, args.cards, args.days, args.seed)
        print(f"bait fleet {args.cards} cards x {args.days} days {profiles}, written in "
              f"{time.perf_counter() - started:.1f} s")
        with contextlib.redirect_stdout(io.StringIO()):
            code = evaluator_main(["backtest", "--db", str(path), "--rules",
                                   *map(str, RULES), "--output", str(output), "--no-progress",
                                   "--log.level", "error"])
        if code != 0:
            raise SystemExit(f"backtest exited {code}")
        report = json.loads(output.read_text())
        rows = {row["version"]: row for row in report["versions"]}
        for version, row in rows.items():
            first = row["by_class"]["first_fault"]
            print(f"{version}: first-fault precision {_ci(first, 'precision')} "
                  f"({first['predictions']['hit']} / {first['matured']}), recall "
                  f"{_ci(first, 'recall')} ({len(first.get('caught', ()))} / "
                  f"{first['faulty_cards']})")
        for version, counts in sorted(by_profile(path, args.cards, args.days, args.seed).items()):
            print(f"{version} predictions by profile and outcome: {dict(sorted(counts.items()))}")
        verdict = compare(point(rows["v3-ecc-sustained"]), point(rows["v2-ecc-xid"]))
        print(f"v3 against v2 (v1's predictions): {verdict.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
