"""Benchmark: the Prometheus source (ingest.source: prometheus) against real servers.

1. **Live cycle**: 10,000 cards (1,250 nodes x 8) with dcgm-exporter's names in a real
   Prometheus (blocks built with ``promtool tsdb create-blocks-from openmetrics``: 12 steps of
   60 s, a day in the past; the evaluator's clock is injected). A cold cycle (fresh process:
   empty dedup cache, empty store), then steady cycles one step each (1 % of the cards change a
   counter per step). Target: one cycle (query + write) < 10 s. Beside it, in the same run, the
   scrape path on the same number of cards (``bench/ingest.py``'s stand-in exporters, 1,250
   targets x 8 GPUs) for points/s and rows/s.
2. **History**: N cards x D days of dcgm-exporter history at 60 s in a real VictoriaMetrics
   (loaded through its import API; 90 % of the cards quiet, 9 % with an error every two days,
   1 % degrading), imported and replayed as on first start
   (:class:`gpu_health.evaluator.backtest.bootstrap.HistoryBootstrap`). Target: 30 days x 4,096
   cards in < 5 min; the size measured here is printed with its extrapolation (linear in points).

    python -m bench.prometheus_source            # 10,000 cards live; 4,096 cards x 2 days
    python -m bench.prometheus_source --quick    # 1,000 cards live; 256 cards x 2 days
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpu_health.evaluator.compose import Service, build_service
from gpu_health.evaluator.config.file import parse_config
from tests.e2e.stack import Procs, free_port, wait_for

STEP = timedelta(minutes=1)
FIELDS = ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
          "DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE",
          "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_ROW_REMAP_FAILURE")


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def labels(card: int) -> str:
    node, gpu = divmod(card, 8)
    return (f'gpu="{gpu}",UUID="GPU-{card:08x}-0000-0000-0000-000000000000",'
            f'device="nvidia{gpu}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-{node:05d}"')


def values(cards: int, steps: int, seed: int) -> list[list[int]]:
    """Per card the correctable count at each step: constant, 1 % of cards +1 per step."""
    rng = random.Random(seed)
    out = []
    for _ in range(cards):
        v, row = rng.randrange(0, 50), []
        for _ in range(steps):
            if rng.random() < 0.01:
                v += 1
            row.append(v)
        out.append(row)
    return out


def fleet_values(cards: int, steps: int, seed: int) -> Iterator[list[int]]:
    """A fleet's correctable counts per step: 90 % of the cards quiet, 9 % with an error every
    two days or so, 1 % degrading (about 70 a day, growing): the replay has work to do."""
    rng = random.Random(seed)
    for _ in range(cards):
        kind = rng.random()
        rate = 0.0 if kind < 0.90 else (1 / 2880 if kind < 0.99 else 0.02)
        v, row = rng.randrange(0, 50), []
        for s in range(steps):
            if rate and rng.random() < rate * (1 + s / 1440 if kind >= 0.99 else 1):
                v += 1
            row.append(v)
        yield row


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except OSError:
        return 0


def service(tmp: Path, url: str, clock: Clock, name: str, **extra: Any) -> Service:
    prom = {"url": url, "metrics": "dcgm", "step": "60s", "lag": "1m", "max_catchup": "1h",
            "timeout": "120s", **extra}
    config = parse_config({"storage": {"path": f"{name}.duckdb"},
                           "web": {"listen_address": "127.0.0.1:0"},
                           "dedup": {"max_entries": 200_000},
                           "alerting": {"enabled": False},
                           "ingest": {"source": "prometheus", "prometheus": prom}}, base=tmp)
    return build_service(config, {}, clock=clock, start_loops=False)


# -- 1. live ------------------------------------------------------------------------------------

def openmetrics(path: Path, cards: int, t0: datetime, steps: int) -> None:
    sbe = values(cards, steps, 1)
    with path.open("w") as out:
        for name in FIELDS:
            out.write(f"# TYPE {name} gauge\n")
            for c in range(cards):
                lab = labels(c)
                for s in range(steps):
                    v = sbe[c][s] if name.endswith("SBE_AGG_TOTAL") else 0
                    out.write(f"{name}{{{lab}}} {v} {int((t0 + s * STEP).timestamp())}\n")
        out.write("# EOF\n")


async def live_cycles(svc: Service, clock: Clock, steps: int) -> list[tuple[str, float, Any]]:
    assert svc.source is not None
    await svc.app.open()
    rows = []
    for i in range(steps):
        clock.now += STEP
        began = time.perf_counter()
        report = await svc.source.run_cycle()
        rows.append(("cold" if i == 0 else "steady", time.perf_counter() - began, report))
    await svc.app.close()
    return rows


def bench_live(tmp: Path, cards: int) -> None:
    steps = 12
    t0 = datetime.fromtimestamp((int(time.time()) // 86400 - 1) * 86400, UTC)
    began = time.perf_counter()
    openmetrics(tmp / "live.om", cards, t0, steps)
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics",
                    str(tmp / "live.om"), str(tmp / "prom")], check=True, capture_output=True)
    (tmp / "prometheus.yml").write_text("global: {}\n")
    procs = Procs(tmp)
    port = free_port()
    procs.start("prometheus", ["prometheus", f"--config.file={tmp / 'prometheus.yml'}",
                               f"--storage.tsdb.path={tmp / 'prom'}",
                               "--storage.tsdb.retention.time=100y",
                               f"--web.listen-address=127.0.0.1:{port}"])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for("prometheus", lambda: _get(url + "/-/ready") == 200, 300, procs)
        print(f"live: {cards:,} cards x {steps} steps loaded into Prometheus in "
              f"{time.perf_counter() - began:.1f} s")
        clock = Clock(t0 + timedelta(minutes=1))  # first cycle reads step 0 (lag 1 min)
        svc = service(tmp, url, clock, "live")
        for phase, seconds, report in asyncio.run(live_cycles(svc, clock, steps)):
            points = cards * len(FIELDS)
            print(f"  {phase:6s} cycle {seconds:6.2f} s  {report.cards:6d} cards  "
                  f"{report.rows_written:6d} rows  {points / seconds:10,.0f} points/s  "
                  f"{report.rows_written / seconds:9,.0f} rows/s")
    finally:
        procs.stop_all()


def bench_scrape(cards: int) -> None:
    """The scrape path on the same fleet, in the same run (bench/ingest.py)."""
    result = subprocess.run([sys.executable, "bench/ingest.py", "--targets", str(cards // 8),
                             "--cycles", "2"], capture_output=True, text=True, check=False)
    print(f"scrape path, {cards // 8:,} targets x 8 GPUs (bench/ingest.py):")
    for line in result.stdout.splitlines():
        if "cycle" in line or "parse" in line:
            print("  " + line.strip())


# -- 2. history ---------------------------------------------------------------------------------

def vm_load(url: str, cards: int, t0: datetime, steps: int) -> int:
    ts = [int((t0 + s * STEP).timestamp() * 1000) for s in range(steps)]
    zeros = [0] * steps
    batch, points = [], 0
    for c, sbe in enumerate(fleet_values(cards, steps, 2)):
        node, gpu = divmod(c, 8)
        metric = {"gpu": str(gpu), "UUID": f"GPU-{c:08x}-0000-0000-0000-000000000000",
                  "Hostname": f"node-{node:05d}", "job": "dcgm"}
        # dcgm-exporter's default XID gauge: 0, and 48 from the middle on for a card whose
        # correctable count ran away (some of the degrading ones)
        xid = [48 if sbe[-1] - sbe[0] > 500 and s > steps // 2 else 0 for s in range(steps)]
        for name, v in ((n, sbe if n.endswith("SBE_AGG_TOTAL") else zeros) for n in FIELDS):
            batch.append(json.dumps({"metric": {"__name__": name, **metric}, "values": v,
                                     "timestamps": ts}))
            points += steps
        batch.append(json.dumps({"metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", **metric},
                                 "values": xid, "timestamps": ts}))
        points += steps
        if len(batch) >= 600 or c == cards - 1:
            request = urllib.request.Request(url + "/api/v1/import",
                                             data="\n".join(batch).encode(), method="POST")
            urllib.request.urlopen(request, timeout=600).close()
            batch = []
    urllib.request.urlopen(url + "/internal/force_flush", timeout=600).close()
    return points


async def history(svc: Service) -> None:
    await svc.app.open()
    assert svc.bootstrap is not None
    await svc.bootstrap.run()
    await svc.app.close()


def bench_history(tmp: Path, cards: int, days: int) -> None:
    vm = shutil.which("victoria-metrics")
    if vm is None:
        print("history: skipped (victoria-metrics is not installed)")
        return
    procs = Procs(tmp)
    port = free_port()
    procs.start("vm", [vm, f"-storageDataPath={tmp / 'vm'}", f"-httpListenAddr=127.0.0.1:{port}",
                       "-retentionPeriod=100y", "-search.disableCache", "-loggerLevel=ERROR",
                       "-search.maxPointsPerTimeseries=100000"])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for("victoria-metrics", lambda: _get(url + "/health") == 200, 60, procs)
        now = datetime.fromtimestamp((int(time.time()) // 86400) * 86400, UTC)
        steps = days * 1440
        began = time.perf_counter()
        points = vm_load(url, cards, now - days * timedelta(days=1), steps)
        print(f"history: {cards:,} cards x {days} days ({points:,} points) loaded into "
              f"VictoriaMetrics in {time.perf_counter() - began:.1f} s")
        svc = service(tmp, url, Clock(now + timedelta(minutes=1)), "history",
                      history=f"{days}d")
        began = time.perf_counter()
        asyncio.run(history(svc))
        seconds = time.perf_counter() - began
        assert svc.bootstrap is not None and svc.bootstrap.summary is not None
        replay = svc.bootstrap.summary.seconds
        scale = (4096 * 30) / (cards * days)  # card-days of the target over those measured
        summary = svc.bootstrap.summary
        print(f"  import + replay {seconds:7.1f} s (replay {replay:.1f} s, "
              f"{summary.predictions} predictions, {summary.resolved}): "
              f"{points / (seconds - replay):,.0f} points/s imported")
        print(f"  extrapolated to 4,096 cards x 30 days: {seconds * scale:.0f} s "
              f"(target < 300 s)")
    finally:
        procs.stop_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cards", type=int, help="live cards (default 10,000; quick 1,000)")
    parser.add_argument("--history-cards", type=int, help="default 4,096; quick 256")
    parser.add_argument("--days", type=int, default=2)
    parser.add_argument("--skip-scrape", action="store_true")
    parser.add_argument("--skip-live", action="store_true")
    args = parser.parse_args(argv)
    cards = args.cards or (1000 if args.quick else 10_000)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_live:
            bench_live(Path(tmp), cards)
        if not args.skip_scrape:
            bench_scrape(cards)
        bench_history(Path(tmp), args.history_cards or (256 if args.quick else 4096), args.days)
    return 0


if __name__ == "__main__":
    sys.exit(main())
