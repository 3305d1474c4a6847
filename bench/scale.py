"""Benchmark: how storage, the tick and the statistics grow with the fleet and the retention.

"100,000 GPUs on one evaluator". For 1,024 / 4,096 / 16,384 cards x 37 days and
4,096 cards x 180 days, the fleet of ``bench.rules`` (5-minute rows, 288 per card and day, the
keep-alive upper bound; pending predictions planted; XID rows) is generated and summarised as
an upgraded store's first tick would (not timed). Then, per fleet:

- file size after a checkpoint: bytes per card-day and per row;
- a FRESH process opens the file and runs one worker tick (backfill + predict) and one
  prediction-stats call: durations and the process's peak memory (ru_maxrss).

Printed: the growth exponent of tick and stats over 1k/4k/16k cards (least squares on log-log),
the 180-day / 37-day ratio at 4,096 cards, and the extrapolation to 100,000 cards.

Targets: <= 3 KB per card-day; at 16,384 cards tick <= 5 s, stats <= 1 s; 180 d within 1.3x of
37 d; exponents <= 1.1; peak memory at 4,096 cards <= 400 MB. Goal at 100,000 cards: tick <= 30 s,
stats <= 2 s, <= 60 GB for 180 days.

    python -m bench.scale            # the full set (~15 minutes, ~10 GB of temporary disk)
    python -m bench.scale --quick    # 64 / 256 / 1,024 cards x 10 days, 256 x 30 days
    python -m bench.scale --cards 16384 32768 100000 --days 8   # measured fleets (bench/fleet.py)
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from bench import fleet
from bench.rules import END, generate, plant_predictions, summarise
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.config.values import parse_size
from gpu_health.evaluator.stats.document import prediction_stats
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.predictions.window_edges import refresh_edges
from gpu_health.evaluator.store.readings.rollups import seal
from gpu_health.evaluator.store.statistics.api_queries import capabilities
from gpu_health.evaluator.worker import Worker

NOW = END - timedelta(minutes=1)
FULL = ((1024, 37), (4096, 37), (16384, 37), (4096, 180))
QUICK = ((64, 10), (256, 10), (1024, 10), (256, 30))


def build(path: Path, cards: int, days: int, story_days: int | None = None) -> dict[str, float]:
    """Generate, plant and summarise one fleet (not timed against the targets); ``story_days``:
    see :func:`bench.rules.generate`."""
    db = DuckDBDatabase(path)
    started = time.perf_counter()
    rows, _ = generate(db, cards, days, END, story_days)
    ruleset = load_ruleset(env={})
    plant_predictions(db, ruleset.version, cards, NOW)
    Worker(db, ruleset, clock=lambda: NOW).register(NOW)
    generated = time.perf_counter() - started
    # Everything before the last hour as an upgraded store's first tick would; then the last
    # hour as the live worker seals it, once an hour (timed: it runs inside a tick).
    sealed_s, edges_s = summarise(db, NOW - timedelta(hours=1))
    started = time.perf_counter()
    seal(db, NOW)
    hour_s = time.perf_counter() - started
    refresh_edges(db, NOW)
    db.execute("CHECKPOINT")
    db.close()
    size = path.stat().st_size
    return {"rows": rows, "generate_s": generated, "seal_s": sealed_s, "edges_s": edges_s,
            "seal_hour_s": hour_s,
            "bytes": size, "per_card_day": size / (cards * days), "per_row": size / rows}


def measure_fresh(path: Path, memory_limit: int | None = None) -> dict[str, float]:
    """Run in a child process: one tick, one stats call and the capability matrix on ``path``
    (``memory_limit``: storage.memory_limit); print JSON."""
    db = DuckDBDatabase(path, memory_limit=memory_limit)
    ruleset = load_ruleset(env={})
    worker = Worker(db, ruleset, clock=lambda: NOW)
    started = time.perf_counter()
    report = worker.tick(NOW)
    tick_s = time.perf_counter() - started
    tick_mb = _peak_mb()
    started = time.perf_counter()
    prediction_stats(db, now=NOW, ruleset=ruleset)
    stats_s = time.perf_counter() - started
    started = time.perf_counter()
    capabilities(db, source="real", now=NOW)
    caps_s = time.perf_counter() - started
    db.close()
    return {"tick_s": tick_s, "stats_s": stats_s, "caps_s": caps_s, "peak_mb": _peak_mb(),
            "tick_peak_mb": tick_mb, "resolved": sum(report.resolved.values()),
            "created": len(report.predictions)}


def _peak_mb() -> float:
    """This process's peak resident memory. VmHWM, not ru_maxrss: a child started from a big
    parent inherits the parent's ru_maxrss across fork + exec (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def exponent(points: list[tuple[int, float]]) -> float:
    """Slope of log(value) over log(cards), least squares."""
    xs = [math.log(c) for c, _ in points]
    ys = [math.log(max(v, 1e-6)) for _, v in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / \
        sum((x - mx) ** 2 for x in xs)


def report(results: dict[tuple[int, int], dict[str, float]], sets: tuple[tuple[int, int], ...]
           ) -> bool:
    base_days = sets[0][1]
    growth = [k for k in sets if k[1] == base_days]
    longest = next(k for k in sets if k[1] != base_days)
    ref = (longest[0], base_days)
    biggest = growth[-1]
    e_tick = exponent([(c, results[(c, d)]["tick_s"]) for c, d in growth])
    e_stats = exponent([(c, results[(c, d)]["stats_s"]) for c, d in growth])
    r_tick = results[longest]["tick_s"] / results[ref]["tick_s"]
    r_stats = results[longest]["stats_s"] / results[ref]["stats_s"]
    size = max(results[biggest]["per_card_day"], results[longest]["per_card_day"])
    scale = 100_000 / biggest[0]
    tick_100k = results[biggest]["tick_s"] * scale ** max(e_tick, 1.0)
    stats_100k = results[biggest]["stats_s"] * scale ** max(e_stats, 1.0)
    print(f"growth exponent over {', '.join(str(c) for c, _ in growth)} cards: "
          f"tick {e_tick:.2f}, stats {e_stats:.2f} (target <= 1.1)")
    print(f"retention {longest[1]} d / {base_days} d at {longest[0]} cards: tick x{r_tick:.2f}, "
          f"stats x{r_stats:.2f} (target <= 1.3)")
    print(f"steady state ({biggest[0]} cards x {biggest[1]} d, {longest[0]} x {longest[1]} d): "
          f"{size:,.0f} bytes per card-day (target <= 3,072)")
    print(f"extrapolated to 100,000 cards (exponent floored at 1): tick {tick_100k:.1f} s "
          f"(goal <= 30), stats {stats_100k:.2f} s (goal <= 2), 180 days "
          f"{size * 100_000 * 180 / 1e9:.1f} GB (goal <= 60)")
    big = results[biggest]
    ok = (e_tick <= 1.1 and e_stats <= 1.1 and r_tick <= 1.3 and r_stats <= 1.3
          and size <= 3072)
    if biggest[0] >= 16384:
        ok = ok and big["tick_s"] <= 5 and big["stats_s"] <= 1
        ok = ok and results[ref]["peak_mb"] <= 400
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cards", type=int, nargs="+", help="measure these fleet sizes")
    parser.add_argument("--days", type=int, default=8, help="days of history (with --cards)")
    parser.add_argument("--memory-limit", type=_size, default=None,
                        help="storage.memory_limit of the measured process (with --cards), "
                             "e.g. 1536MiB")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--reference", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure_fresh(args.child, args.memory_limit)))
        return 0
    if args.reference:
        baseline = load_ruleset(env={}).params.baseline
        print(json.dumps(fleet.measure_reference(args.reference, NOW, baseline)))
        return 0
    if args.cards:
        return measure_fleets(sorted(set(args.cards)), args.days, args.memory_limit)
    sets = QUICK if args.quick else FULL
    results: dict[tuple[int, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gpu-health-scale-") as tmp:
        for cards, days in sets:
            path = Path(tmp) / f"{cards}x{days}.duckdb"
            built = build(path, cards, days)
            fresh = _child("--child", path)
            results[(cards, days)] = built | fresh
            print(f"{cards:>6} cards x {days:>3} d: {built['rows']:>12,.0f} rows, "
                  f"{built['per_card_day']:,.0f} B/card-day ({built['per_row']:.1f} B/row); "
                  f"tick {fresh['tick_s']:.2f} s, stats {fresh['stats_s']:.2f} s, peak "
                  f"{fresh['peak_mb']:.0f} MB (fresh process); not timed: generate "
                  f"{built['generate_s']:.0f} s, summarise {built['seal_s']:.0f} s + edges "
                  f"{built['edges_s']:.1f} s", flush=True)
            path.unlink()
    ok = report(results, sets)
    if args.quick:  # sub-second timings of tiny fleets: the targets are for the full run
        print("quick run: numbers only, the targets apply to the full run")
        return 0
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


def measure_fleets(sizes: list[int], days: int, memory_limit: int | None) -> int:
    """Build and measure each fleet (bench/fleet.py); the last line says whether the targets
    were met."""
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gpu-health-fleet-") as tmp:
        for cards in sizes:
            path = Path(tmp) / f"{cards}x{days}.duckdb"
            limit = () if memory_limit is None else ("--memory-limit", str(memory_limit))
            results[cards] = build(path, cards, days, fleet.STORY_DAYS) | \
                _child("--child", path, *limit) | \
                _child("--reference", path)
            print(fleet.line(cards, days, results[cards]), flush=True)
            path.unlink()
    growth = None
    if len(sizes) >= 2:
        pair = sizes[-2:]
        growth = {key: exponent([(c, results[c][f"{key}_s"]) for c in pair])
                  for key in ("tick", "stats")}
        print(f"growth exponent {pair[0]:,} -> {pair[1]:,} cards: tick {growth['tick']:.2f}, "
              f"stats {growth['stats']:.2f} (target <= {fleet.EXPONENT})")
        if len(sizes) > 2:
            over = {key: exponent([(c, results[c][f"{key}_s"]) for c in sizes])
                    for key in ("tick", "stats")}
            print(f"growth exponent over {', '.join(f'{c:,}' for c in sizes)} cards (least "
                  f"squares): tick {over['tick']:.2f}, stats {over['stats']:.2f}")
    missed = fleet.misses(results, growth)
    print("targets met" if not missed else "TARGET MISSED: " + "; ".join(missed))
    return 0 if not missed else 1


def _size(text: str) -> int:
    size = parse_size(text)
    if size is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count like 1536MiB")
    return size


def _child(flag: str, path: Path, *extra: str) -> dict[str, float]:
    """A fresh process measuring ``path`` (its last stdout line is JSON)."""
    child = subprocess.run([sys.executable, "-m", "bench.scale", flag, str(path), *extra],
                           check=True, capture_output=True, text=True)
    return dict(json.loads(child.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    sys.exit(main())
