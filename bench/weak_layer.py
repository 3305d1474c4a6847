"""Measurement: does ``calibrate`` adopt the weak layer's gate where it helps, and only there?

Two planted fleets per seed, with the correctable-error histories of the calibration fleet
(:func:`tests.evaluator.calibrate_support.card_events`: two-week ramps before most faults,
ramps that survive, noisy cards with bursts, sudden faults, quiet cards) and one of the weak
layer's signals planted on them (:func:`tests.evaluator.calibrate_support.plant_weak`): with
``--signal heat`` two hours of thermal slowdown a day from a card's onset on, with
``--signal replays`` 5,000 PCIe replays a day, with ``--signal nvlink`` 24 NVLink errors a day:

- *precursor*: 90% of the ramps that end in a fault show it for the week before it, 5% of the
  other cards from a random day on (:func:`~tests.evaluator.calibrate_support.heat_before_faults`);
- *noise*: 30% of the cards, picked by a coin of their own, show it from a random day on, with
  no relation to their faults (:func:`~tests.evaluator.calibrate_support.heat_as_noise`).

Each fleet is calibrated through the command from ``v4-ecc-tuned`` (heat), ``v5-ecc-tuned``
(replays) or ``v6-ecc-tuned`` (nvlink): rules/v4-ecc-weak.yaml, rules/v5-ecc-weak-pcie.yaml or
rules/v6-ecc-weak-links.yaml with the growth threshold the calibration fleet chose,
``min_increase`` 8, under its own name, over ``weak_gate`` (evidence, require) x
``min_increase`` (4, 8, 16), with the default objective (the most recall at a precision of at
least 0.2) and with a precision-first one (``--min-precision 0.8``; the replays are reused,
only the choice and the verdict are made again). A ``better`` verdict with
``weak_gate=require`` on a noise fleet is a false adoption. The reference, measured in the
same run on the same file: the replay of the base alone (the seconds the search adds to it).

    python -m bench.weak_layer                 # 320 cards x 150 days, seeds 11 and 12
    python -m bench.weak_layer --signal replays  # the same with PCIe replays planted
    python -m bench.weak_layer --signal nvlink   # the same with NVLink errors planted
    python -m bench.weak_layer --quick         # 96 cards x 90 days, seed 11: too few faults
                                               # for a verdict, a look at the mechanics
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.calibrate import calibrate as run_calibrate
from gpu_health.evaluator.calibrate.report import describe
from tests.evaluator.calibrate_support import (
    card_events,
    heat_as_noise,
    heat_before_faults,
    plant_weak,
    write_profiled_fleet,
)
from tests.shared import REPO

V4 = REPO / "rules" / "v4-ecc-weak.yaml"
V5 = REPO / "rules" / "v5-ecc-weak-pcie.yaml"
V6 = REPO / "rules" / "v6-ecc-weak-links.yaml"
BASES = {"heat": V4, "replays": V5, "nvlink": V6}
STEP = timedelta(minutes=5)
SEARCH = ["--search", "weak_gate=evidence,require", "--search", "min_increase=4,8,16"]
SETTINGS = ("0.2", "0.8")
FLEETS = {"precursor": heat_before_faults, "noise": heat_as_noise}


def tuned_base(folder: Path, signal: str = "heat") -> Path:
    """The signal's rule file with ``min_increase`` 8, as ``v4-ecc-tuned``, ``v5-`` or ``v6-``."""
    rules = BASES[signal]
    name = rules.stem.split("-", 1)[0] + "-ecc-tuned"
    text = "\n".join(f"version: {name}" if line.startswith("version:") else
                     "min_increase: 8" if line.startswith("min_increase:") else line
                     for line in rules.read_text().splitlines()) + "\n"
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def calibrate(db: Path, rules: Path, output: Path, *search: str) -> tuple[float, dict[str, Any]]:
    """Seconds and report of ``calibrate`` on ``db`` from ``rules`` (bench.calibrate's run)."""
    return run_calibrate(["--db", str(db), "--rules", str(rules), *search], output)


def one_fleet(folder: Path, name: str, seed: int, cards: int, days: int,
              signal: str) -> dict[str, tuple[str, str | None]]:
    """(verdict, the chosen version's weak_gate) per --min-precision setting."""
    db = folder / f"{name}-{seed}.duckdb"
    profiles = write_profiled_fleet(db, card_events, cards, days, step=STEP, seed=seed)[1]
    heated = plant_weak(db, FLEETS[name], cards, days, seed=seed, signal=signal)
    base = tuned_base(folder, signal)
    # the reference: the base alone on the same file (its replay is then reused)
    alone, _ = calibrate(db, base, folder / "ref.json", "--search", "min_increase=8")
    print(f"{name} fleet, seed {seed}: {cards} cards x {days} days, profiles {profiles}, "
          f"{heated} planted with {signal}; the base alone {alone:.1f} s")
    result = {}
    for setting in SETTINGS:
        took, report = calibrate(db, base, folder / "out.json", *SEARCH, "--min-precision",
                                 setting)
        chosen = report["chosen"]
        result[setting] = (report["verdict"]["status"],
                           None if chosen is None else chosen["params"]["weak_gate"])
        print(f"  --min-precision {setting}: {took:.1f} s more "
              f"({report['search']['candidates']} candidates); verdict "
              f"{report['verdict']['status']}: {report['verdict']['reason']}")
        for label, m in (("base", report["base"]), ("chosen", chosen)):
            if m is None or (label == "base" and setting != SETTINGS[0]):
                continue
            changed = ", ".join(f"{k}={new}" for k, (_, new) in m["changes"].items())
            print(f"    {label} {m['version']} ({changed or 'as the base'})")
            print(f"      train: {describe(m['train'])}\n      test:  {describe(m['test'])}")
        if setting == SETTINGS[0]:  # what requiring the signal did, chosen or not
            for c in report["candidates"]:
                if c["searched"].get("weak_gate") == "require":
                    print(f"    searched {c['searched']}: train {describe(c['train'])}")
    db.unlink()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", default="11,12")
    parser.add_argument("--cards", type=int, default=320)
    parser.add_argument("--days", type=int, default=150)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--signal", choices=sorted(BASES), default="heat")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.cards, args.days = "11", 96, 90
    logging.basicConfig(level=logging.ERROR)
    results: dict[str, list[dict[str, tuple[str, str | None]]]] = {name: [] for name in FLEETS}
    with tempfile.TemporaryDirectory(prefix="gpu-health-weak-") as tmp:
        for seed in (int(s) for s in args.seeds.split(",")):
            for name in FLEETS:
                results[name].append(one_fleet(Path(tmp), name, seed, args.cards, args.days,
                                               args.signal))
    false = 0
    print("\nfleet | --min-precision | adopted (better, weak_gate=require) | verdicts")
    for name, runs in results.items():
        for setting in SETTINGS:
            got = [r[setting] for r in runs]
            adopted = sum(v == ("better", "require") for v in got)
            false += adopted if name == "noise" else 0
            print(f"{name} | {setting} | {adopted} / {len(got)} | "
                  + ", ".join(f"{v} ({g})" for v, g in got))
    print(f"\nfalse adoptions on noise fleets: {false} (target 0)")
    return 0 if false == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
