"""Benchmark: ``backtest --events`` on a large events file, memory bounded by a constant.

A seeded Calchas-shaped CSV (the public dataset's columns: Datacenter, Server, Name, the bank
address, Time in Unix seconds, EccType) of ``--rows`` error events over ``--cards`` cards (8 per
server) and ``--days`` days, in time order like an export: events fall on cards by a skewed
draw (a few cards carry most of them, as in the public dataset), 1 in 1,000 is uncorrectable.
The file is then run through the command itself in a child process, whose peak RSS the kernel
reports (``ru_maxrss`` of the waited child), against the same reference measured in the same
run: the child reading the same file with the csv module alone (the floor of any import).

    python -m bench.events_import                  # 5,000,000 rows, 2,048 cards x 30 days
    python -m bench.events_import --rows 200000    # quick

Target: peak RSS <= 1 GB and a replay that finishes; the last line says ``targets met`` or
``TARGET MISSED: ...``.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from tests.shared import REPO

V1: Final = REPO / "rules" / "v1-ecc-growth.yaml"
HEADER: Final = "Datacenter,Server,Name,Stack,SID,PcId,BankGroup,BankArray,Col,Row,Time,EccType\n"
START_S: Final = 1_767_225_600  # 2026-01-01T00:00:00Z
TARGET_RSS: Final = 1024 ** 3
READ_ONLY: Final = """import csv, sys
n = 0
with open(sys.argv[1], encoding="utf-8", newline="") as fh:
    for row in csv.DictReader(fh):
        n += 1
print(n)
"""


def card_name(c: int) -> tuple[str, str]:
    """(Server, Name) of card ``c``: 8 devices per server, every card distinct."""
    server = c // 8
    return f"10.{server >> 16 & 255}.{server >> 8 & 255}.{server & 255}", f"DSA{c % 8}"


def write_events_csv(path: Path, *, rows: int, cards: int, days: int, seed: int = 11) -> int:
    """Write the file (see the module docstring); returns how many distinct cards it names."""
    rng = random.Random(seed)
    span = days * 86400
    times = sorted(rng.randrange(span) for _ in range(rows))
    names = [card_name(c) for c in range(cards)]
    used: set[int] = set()
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(HEADER)
        out: list[str] = []
        for t in times:
            c = min(cards - 1, int(cards * rng.random() ** 3))  # skewed: low ids carry most
            used.add(c)
            server, name = names[c]
            kind = "UER" if rng.random() < 0.001 else "CE"
            out.append(f"Datacenter1,{server},{name},0x1,0x0,0x1,0x2,0x1,0x54,0x3e2b,"
                       f"{START_S + t},{kind}\n")
            if len(out) >= 100_000:
                fh.writelines(out)
                out.clear()
        fh.writelines(out)
    return len(used)


def run_child(argv: list[str]) -> tuple[float, int, int, str]:
    """(wall seconds, peak RSS bytes, exit code, the line naming the input) of one child
    process; one child at a time, so RUSAGE_CHILDREN's maximum grows only by this one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak_kib <= before:  # the maximum over children: this one stayed below an earlier one
        peak_kib = before
    lines = (done.stdout + done.stderr).strip().splitlines()
    said = [line for line in lines if "samples written" in line] or lines[-1:] or [""]
    return wall, peak_kib * 1024, done.returncode, said[0].strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--cards", type=int, default=2048)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpu-health-events-") as tmp:
        csv_path = Path(tmp) / "events.csv"
        started = time.perf_counter()
        named = write_events_csv(csv_path, rows=args.rows, cards=args.cards, days=args.days)
        print(f"generated {args.rows:,} rows naming {named:,} distinct cards x {args.days} days "
              f"({csv_path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.0f} s")
        # the reference first: RUSAGE_CHILDREN keeps the maximum, so the smaller child goes first
        ref_wall, ref_rss, _, _ = run_child([sys.executable, "-c", READ_ONLY, str(csv_path)])
        print(f"reference (csv module reads the file): {ref_wall:.1f} s, peak RSS "
              f"{ref_rss / 2**20:,.0f} MiB")
        wall, rss, code, last = run_child([
            sys.executable, "-m", "gpu_health.evaluator.main", "backtest", "--events",
            str(csv_path), "--preset", "calchas", "--rules", str(V1), "--db",
            str(Path(tmp) / "bt.duckdb"), "--no-progress", "--no-baselines",
            "--log.level", "warn"])
        print(f"backtest --events (import + replay + report): {wall:.1f} s (x{wall / ref_wall:.1f}"
              f" the reference), peak RSS {rss / 2**20:,.0f} MiB, exit {code}; {last}")
    missed = [m for ok, m in ((code == 0, f"exit {code}"),
                              (rss <= TARGET_RSS, f"peak RSS {rss / 2**20:,.0f} MiB > 1 GiB"))
              if not ok]
    print("targets met" if not missed else f"TARGET MISSED: {'; '.join(missed)}")
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
