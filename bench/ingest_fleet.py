"""Benchmark: one evaluator process ingesting 100,000 GPUs, against the cost of only fetching.

A loopback fleet of ``--targets`` exporters x 8 GPUs (one aiohttp process, ``/t/<i>/metrics``,
gzip when asked) serves the exporter's own exposition, rendered by its own code
(``exporter.collector.card_families``, ``status_families``, the XID families, build and node
info, and prometheus_client's process and platform collectors): each card's counters, row-remap
details, recovery action and five memory XIDs, every card with its own UUID. Before each steady
cycle ``--changed`` of the cards (1%) get one more correctable error, and every answer's own
timings change, as a live exporter's do.

In this process, with the same scraper (the production ``Scraper``, the default concurrency):

- the reference: a cycle that only fetches the same answers (HTTP, gunzip, UTF-8), no parsing;
- the production ``IngestPipeline`` (parse, write rule, dedup caches at their defaults, DuckDB):
  the first cycle (empty store and caches; the store's ``--memory-limit`` throughout, as one
  process has one ``storage.memory_limit``), then steady cycles, each right after a reference
  cycle over the same answers; then as many with every answer parsed in full (the parse memo
  off), to show what the memo saves.

CPU-seconds are this process's (all its threads: ``time.process_time``), under the garbage-
collector thresholds ``gpu-health-evaluator run`` sets (``ingest.collector_thresholds``). The
same is run at a tenth of the fleet for the growth exponent. Then the same process, its scraper
and caches still alive, opens a ``--store-cards`` x ``--store-days`` store (built beforehand in
a child process, or copied from ``--store``; not timed) and runs one worker tick, the statistics
and the capability matrix; the peak RSS is this process's (VmHWM) over everything.

    python -m bench.ingest_fleet                 # 12,500 targets; a 100,000-card x 8-day store
    python -m bench.ingest_fleet --quick         # 1,250 targets; a 10,000-card x 2-day store
    python -m bench.ingest_fleet --build S.duckdb 100000 8 && \
        python -m bench.ingest_fleet --store S.duckdb   # build the store once, measure on copies

Targets at 100,000 cards: steady cycle <= 5x the fetch-only CPU, first <= 10x, peak <= 2 GB,
CPU growth exponent (10k -> 100k cards) <= 1.1, capability matrix <= 1 s. The last line says
``targets met`` or ``TARGET MISSED: ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import math
import multiprocessing
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, web
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from bench import scale
from bench.loopback import FullParse, run_server
from gpu_health.clock import system_clock
from gpu_health.contract import NODE_LABEL, NODE_METRIC
from gpu_health.evaluator.config.scrape import ScrapeConfig
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest import collector_thresholds
from gpu_health.evaluator.ingest.cards import CardExtraction
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.parse_memo import ParseMemo
from gpu_health.evaluator.ingest.scrape import Scraper
from gpu_health.evaluator.ingest.scrape_tick import IngestPipeline
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.exporter.cache import VendorStatus
from gpu_health.exporter.collector import card_families, status_families
from gpu_health.exporter.tool_output import CardReading, make_counters, make_remap
from gpu_health.exporter.xid_store import XidSnapshot, xid_families

GPUS = 8
VENDORS = ("nvidia", "ascend", "hygon", "cambricon", "kunlunxin", "iluvatar", "metax", "moore",
           "enflame")  # the exporter reports each vendor's status, enabled or not
STEADY_X, FIRST_X, PEAK_MB, EXPONENT, CAPS_S = 5.0, 10.0, 2048.0, 1.1, 1.0


class _Families(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


def _text(families: Iterable[Metric]) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry).decode()


def uuid(target: int, gpu: int) -> str:
    return f"GPU-{target:08x}-{gpu:04x}-4000-8000-{target * GPUS + gpu:012x}"


def cards_text(target: int, corrected: dict[int, int]) -> str:
    """The card, XID and node families of one 8-GPU node, as the exporter renders them."""
    readings = [CardReading(
        "nvidia", g, uuid(target, g), "NVIDIA H100 80GB HBM3",
        make_counters({"ecc_uncorrected_total": 0,
                       "ecc_corrected_total": corrected.get(target * GPUS + g, 0),
                       "remapped_rows_pending": 0, "remapped_rows_failure": 0}),
        pci_bus_id=f"00000000:{g + 0x18:02X}:00.0",
        remap=make_remap({"remapped_rows_correctable": 0, "remapped_rows_uncorrectable": 0}),
        recovery_action="none", pages_pending=0) for g in range(GPUS)]
    xids = XidSnapshot(tuple((g, uuid(target, g)) for g in range(GPUS)), {},
                       {"kmsg": True}, 0)
    node = GaugeMetricFamily(NODE_METRIC, "The node this exporter runs on.", labels=[NODE_LABEL])
    node.add_metric([node_name(target)], 1.0)
    return _text([*card_families(readings), *xid_families(xids), node])


def tail_text(cycle: int) -> str:
    """What changes in every answer every minute: the vendors' status and the process."""
    at = datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=cycle)
    vendors = [VendorStatus(v, v == "nvidia", True if v == "nvidia" else None,
                            0.21 + cycle % 7 / 100 if v == "nvidia" else None,
                            at if v == "nvidia" else None) for v in VENDORS]
    return _text(status_families(vendors)) + generate_latest(REGISTRY).decode()


def node_name(target: int) -> str:
    return f"node-{target:05d}"


def serve(port_queue: Queue[int], targets: int, seed: int) -> None:
    """The loopback fleet (its own process)."""
    corrected: dict[int, int] = {}
    cards = [cards_text(t, corrected) for t in range(targets)]
    tail = [tail_text(0)]  # this cycle's
    cycle = [0]
    rng = random.Random(seed)

    async def metrics(request: web.Request) -> web.Response:
        body = (cards[int(request.match_info["i"])] + tail[0]).encode()
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            return web.Response(body=gzip.compress(body, 1), headers={
                "Content-Encoding": "gzip", "Content-Type": "text/plain; version=0.0.4"})
        return web.Response(body=body, content_type="text/plain")

    async def advance(request: web.Request) -> web.Response:
        chosen = rng.sample(range(targets * GPUS), int(targets * GPUS * float(
            request.query["fraction"])))
        for card in chosen:
            corrected[card] = corrected.get(card, 0) + 1
        for t in {c // GPUS for c in chosen}:
            cards[t] = cards_text(t, corrected)
        cycle[0] += 1
        tail[0] = tail_text(cycle[0])
        return web.json_response({"changed": len(chosen)})

    run_server(port_queue, {"/t/{i}/metrics": metrics, "/advance": advance})


class FetchOnly(ParseMemo):
    """The reference: the answer is fetched and decoded, never parsed."""

    def parse(self, key: str, text: str, *, sample_limit: int | None = None,
              max_cards: int | None = None) -> CardExtraction:
        return CardExtraction()


def _cpu() -> float:
    return time.process_time()


async def _timed(coro: Any) -> tuple[float, float, Any]:
    cpu, wall = _cpu(), time.perf_counter()
    result = await coro
    return _cpu() - cpu, time.perf_counter() - wall, result


async def measure_fleet(port: int, targets: int, cycles: int, changed: float,
                        store: Path, memory_limit: int | None = None) -> dict[str, Any]:
    """The reference and the pipeline on one fleet; returns the numbers (and keeps nothing
    but the returned objects alive: the caller holds ``kept`` through the store phase)."""
    collector_thresholds.apply()  # what the evaluator's ``run`` sets for its process
    fleet = [Target(f"127.0.0.1:{port}", node_name(i), metrics_path=f"/t/{i}/metrics")
             for i in range(targets)]
    conf = ScrapeConfig()
    scraper = Scraper(timeout=30, max_concurrency=conf.max_concurrency,
                      max_response_bytes=conf.max_response_bytes, clock=system_clock,
                      sample_limit=conf.sample_limit, max_cards=conf.max_cards_per_target)
    db = DuckDBDatabase(store, memory_limit=memory_limit)  # one process: one storage.memory_limit
    ingestor = Ingestor(db, DedupCache(), keepalive=timedelta(minutes=5))
    pipeline = IngestPipeline(targets=lambda: fleet, scraper=scraper, ingestor=ingestor,
                              clock=system_clock)
    memo = ParseMemo()
    out: dict[str, Any] = {"fetch": [], "steady": [], "rows": [], "full": []}
    async with scraper, ClientSession() as control:
        for n in range(2 * cycles + 1):  # the last ``cycles`` parse every answer in full
            if n:
                async with control.get(f"http://127.0.0.1:{port}/advance",
                                       params={"fraction": str(changed)}) as r:
                    await r.read()
            scraper.memo = FetchOnly()
            cpu, wall, results = await _timed(scraper.scrape_all(fleet))
            assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
            out["fetch"].append((cpu, wall))
            scraper.memo = memo if n <= cycles else FullParse()
            cpu, wall, report = await _timed(pipeline.run_cycle())
            assert report.targets_up == targets and report.cards == targets * GPUS, report
            if n:
                out["steady" if n <= cycles else "full"].append((cpu, wall))
            else:
                out["first"] = (cpu, wall)
            out["rows"].append(report.rows_written)
    db.close()
    out["kept"] = (scraper, ingestor, memo)  # the ingest side's memory, for the store phase
    return out


def run_fleet(targets: int, cycles: int, changed: float, tmp: Path,
              memory_limit: int | None = None) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    port_queue: Queue[int] = ctx.Queue()
    server = ctx.Process(target=serve, args=(port_queue, targets, 1), daemon=True)
    server.start()
    try:
        port = port_queue.get(timeout=600)
        result = asyncio.run(measure_fleet(port, targets, cycles, changed,
                                           tmp / f"ingest-{targets}.duckdb", memory_limit))
    finally:
        server.terminate()
        server.join(10)
    fetch = statistics.median(c for c, _ in result["fetch"])
    steady = statistics.median(c for c, _ in result["steady"])
    full = statistics.median(c for c, _ in result["full"])
    first = result["first"][0]
    print(f"{targets:,} targets x {GPUS} GPUs = {targets * GPUS:,} cards: fetch only "
          f"{fetch:.2f} CPU-s per cycle (median of {len(result['fetch'])}); first cycle "
          f"{first:.2f} CPU-s ({result['first'][1]:.1f} s wall, x{first / fetch:.1f}); steady "
          f"{steady:.2f} CPU-s (median of {len(result['steady'])}, wall "
          f"{statistics.median(w for _, w in result['steady']):.1f} s, x{steady / fetch:.1f}); "
          f"rows written {result['rows']}; peak RSS so far {scale._peak_mb():,.0f} MB; "
          f"steady with every answer parsed in full (no parse memo) {full:.2f} CPU-s "
          f"(x{full / fetch:.1f})", flush=True)
    return result | {"fetch_cpu": fetch, "steady_cpu": steady, "first_cpu": first}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--targets", type=int, default=None)
    parser.add_argument("--cycles", type=int, default=3, help="steady cycles")
    parser.add_argument("--changed", type=float, default=0.01)
    parser.add_argument("--store-cards", type=int, default=None)
    parser.add_argument("--store-days", type=int, default=None)
    # 1GiB: with the ingest side's ~0.6 GB beside it, 1536MiB (what a store-only process
    # needs to stay under 2 GB: bench.scale) put this process at 2.2 GB
    parser.add_argument("--memory-limit", default="1GiB", help="the store's memory_limit")
    parser.add_argument("--store", type=Path, default=None,
                        help="a store built earlier with --build PATH CARDS DAYS (the same "
                             "--store-cards and --store-days): copied, never changed")
    parser.add_argument("--build", nargs=3, metavar=("PATH", "CARDS", "DAYS"),
                        help="build a store for --store and exit")
    args = parser.parse_args(argv)
    if args.build:
        scale.build(Path(args.build[0]), int(args.build[1]), int(args.build[2]))
        return 0
    targets = args.targets or (1250 if args.quick else 12_500)
    store_cards = args.store_cards or (10_000 if args.quick else 100_000)
    store_days = args.store_days or (2 if args.quick else 8)
    with tempfile.TemporaryDirectory(prefix="gpu-health-ingest-fleet-") as name:
        tmp = Path(name)
        store = tmp / "store.duckdb"
        started = time.perf_counter()
        if args.store is not None:
            shutil.copyfile(args.store, store)
            how = f"copied from {args.store}"
        else:
            subprocess.run([sys.executable, "-m", "bench.ingest_fleet", "--build", str(store),
                            str(store_cards), str(store_days)], check=True)
            how = "built in a child process"
        print(f"store of {store_cards:,} cards x {store_days} days {how} "
              f"({time.perf_counter() - started:.0f} s, not timed)", flush=True)
        limit = scale._size(args.memory_limit)
        small = run_fleet(max(1, targets // 10), args.cycles, args.changed, tmp, limit)
        big = run_fleet(targets, args.cycles, args.changed, tmp, limit)
        growth = math.log(big["steady_cpu"] / small["steady_cpu"]) / math.log(
            targets / max(1, targets // 10))
        print(f"CPU growth exponent {max(1, targets // 10) * GPUS:,} -> {targets * GPUS:,} "
              f"cards (steady cycles): {growth:.2f}", flush=True)
        measured = scale.measure_fresh(store, limit)
        print(f"then, in the same process: tick {measured['tick_s']:.2f} s, statistics "
              f"{measured['stats_s']:.2f} s, capability matrix {measured['caps_s']:.2f} s; "
              f"peak RSS of the whole process {measured['peak_mb']:,.0f} MB", flush=True)
        del big["kept"], small["kept"]
    missed = [m for ok, m in (
        (big["steady_cpu"] <= STEADY_X * big["fetch_cpu"],
         f"steady x{big['steady_cpu'] / big['fetch_cpu']:.1f} > {STEADY_X:g}x fetch"),
        (big["first_cpu"] <= FIRST_X * big["fetch_cpu"],
         f"first x{big['first_cpu'] / big['fetch_cpu']:.1f} > {FIRST_X:g}x fetch"),
        (measured["peak_mb"] <= PEAK_MB, f"peak {measured['peak_mb']:,.0f} MB > 2 GB"),
        (growth <= EXPONENT, f"exponent {growth:.2f} > {EXPONENT}"),
        (measured["caps_s"] <= CAPS_S, f"capability matrix {measured['caps_s']:.2f} s > 1 s"),
    ) if not ok]
    print("targets met" if not missed else "TARGET MISSED: " + "; ".join(missed))
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
