"""Measurement: how often ``calibrate`` says ``better`` on fleets where nothing predicts a fault.

A *null fleet* (:func:`tests.evaluator.calibrate_support.null_events`) has cards with every
correctable-error history the planted fleet has (noisy cards with bursts, ramps, quiet cards),
and faults that do not depend on it: half of the cards, picked by a coin independent of their
history, fail once at a uniform random time (enough first faults for the test part to be
judged). No rule on correctable errors can be better than another there except by chance, so
every ``better`` verdict is a false one.

Each fleet is calibrated through the command from two bases: the shipped ``v1-ecc-growth`` (too
strict to be measured on such fleets) and a loose base (``min_increase`` 4, one window, no shape
gate) that fires on most noisy cards; at each ``--min-precision`` setting. The replays are made
once per fleet and base (a calibration on the same ``--db`` goes on from the predictions already
there), so the settings only redo the choice and the verdict.

    python -m bench.null_fleets                       # 10 fleets, settings 0.2 .. 0.01
    python -m bench.null_fleets --fleets 3 --cards 96 # a quick look

Prints, per base and setting, the false-``better`` count with its Wilson 95% interval and the
other verdicts; the target is at most 1 in 20 at every setting.
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

from gpu_health.evaluator.main import main as evaluator_main
from gpu_health.evaluator.stats.intervals import wilson
from tests.evaluator.calibrate_support import null_events, write_profiled_fleet
from tests.shared import REPO

V1 = REPO / "rules" / "v1-ecc-growth.yaml"
STEP = timedelta(minutes=5)
SETTINGS = ("0.2", "0.1", "0.05", "0.02", "0.01")


def write_null_fleet(path: Path, cards: int, days: int, seed: int) -> dict[str, int]:
    return write_profiled_fleet(path, null_events, cards, days, step=STEP, seed=seed)[1]


def loose_base(folder: Path) -> Path:
    """v1's file with the eagerest thresholds of the default space, under its own name."""
    text = V1.read_text().replace("version: v1-ecc-growth", "version: v1-loose")
    for key, value in (("min_increase", "4"), ("consecutive_windows", "1")):
        lines = [f"{key}: {value}" if line.startswith(f"{key}:") else line
                 for line in text.splitlines()]
        text = "\n".join(lines) + "\n"
    path = folder / "v1-loose.yaml"
    path.write_text(text)
    return path


def calibrate(db: Path, rules: Path, min_precision: str, output: Path) -> str:
    with contextlib.redirect_stdout(io.StringIO()):
        code = evaluator_main(["calibrate", "--db", str(db), "--rules", str(rules),
                               "--min-precision", min_precision, "--output", str(output),
                               "--no-progress", "--log.level", "error"])
    if code != 0:
        raise SystemExit(f"calibrate exited {code}")
    return str(json.loads(output.read_text())["verdict"]["status"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fleets", type=int, default=10)
    parser.add_argument("--cards", type=int, default=128)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--first-seed", type=int, default=101)
    parser.add_argument("--settings", default=",".join(SETTINGS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    settings = args.settings.split(",")
    verdicts: dict[tuple[str, str], Counter[str]] = {}
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-health-null-") as tmp:
        folder = Path(tmp)
        bases = {"v1-ecc-growth": V1, "v1-loose": loose_base(folder)}
        for n in range(args.fleets):
            seed = args.first_seed + n
            db = folder / f"null-{seed}.duckdb"
            profiles = write_null_fleet(db, args.cards, args.days, seed)
            faults = sum(v for k, v in profiles.items() if k.endswith("+fault"))
            line = [f"fleet {seed}: {faults} faulty of {args.cards}"]
            for name, rules in bases.items():
                for mp in settings:
                    status = calibrate(db, rules, mp, folder / "out.json")
                    verdicts.setdefault((name, mp), Counter())[status] += 1
                    line.append(f"{name}@{mp}={status}")
            db.unlink()
            print("; ".join(line), f"({time.perf_counter() - began:.0f} s)", flush=True)
    print("\nbase | --min-precision | false better / fleets [Wilson 95%] | other verdicts")
    worst = 0.0
    for (name, mp), counts in sorted(verdicts.items(), key=lambda kv: (kv[0][0],
                                                                        -float(kv[0][1]))):
        total, better = sum(counts.values()), counts.get("better", 0)
        lo, hi = wilson(better, total) or (0.0, 1.0)
        worst = max(worst, better / total)
        others = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "better")
        print(f"{name} | {mp} | {better} / {total} [{lo:.3f}, {hi:.3f}] | {others}")
    print(f"\nworst observed false-better rate {worst:.3f} (target <= 0.050): "
          f"{'met' if worst <= 0.05 else 'MISSED'}")
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
