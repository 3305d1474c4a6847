"""Benchmark: the ingest cycle with and without 200 concurrent API clients.

One process is the evaluator as it runs in production: one event loop, one store and its
thread pool, the production ``IngestPipeline`` scraping a stand-in fleet (bench/ingest.py's
server, its own process) and the read API served over real HTTP with the API's load gate at
its defaults (``api.max_concurrency`` 1, ``api.max_queue`` 32, 503 + Retry-After beyond). A
second process runs the clients: 200 requests in flight at a time (capabilities, a page of
predictions, one card's samples), as fast as answers come. The store holds generated history
(bench/api.py's generator) so the API's statements cost what they cost on a real store.

Printed: the mean ingest cycle (and median, max) alone, under load with the gate, and under
load without it (the reference in the same run: the machine is shared, so ratios decide), the
API's answers by status with p50/p99 latency. Cycles run ``--gap`` seconds apart (1 s;
production runs one a minute): the gap is when the gated API gets its turns. Target: the mean
cycle under load with the gate within 1.5x of alone. The last line reads ``targets met`` or
``TARGET MISSED: <what>``.

    python -m bench.api_load            # 1,000 targets x 8 GPUs, 2,048 cards x 7 days stored
    python -m bench.api_load --quick    # 100 targets x 8 GPUs, 256 cards x 3 days
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from datetime import timedelta
from multiprocessing.queues import Queue
from pathlib import Path

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web
from prometheus_client import CollectorRegistry

from bench.api import _generate
from bench.ingest import serve
from gpu_health.clock import system_clock
from gpu_health.evaluator.config.api import ApiConfig
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.http.access import new_application
from gpu_health.evaluator.http.api.context import ApiContext
from gpu_health.evaluator.http.api.gate import ApiGate
from gpu_health.evaluator.http.api.routes import add_api_routes
from gpu_health.evaluator.http.errors import RequestMetrics
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.scrape import Scraper
from gpu_health.evaluator.ingest.scrape_tick import IngestPipeline
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase

CLIENTS = 200
PATHS = ("/api/v1/gpu-health/capabilities",
         "/api/v1/gpu-health/predictions?limit=100",
         "/api/v1/gpu-health/samples?node_id=node-0001&gpu_index=0&limit=5000")


def clients(base: str, seconds: float, out: Queue[tuple[Counter[int], list[float]]]) -> None:
    """The load (its own process): CLIENTS requests in flight until ``seconds`` have passed."""
    async def main() -> None:
        codes: Counter[int] = Counter()
        latencies: list[float] = []
        deadline = time.monotonic() + seconds
        async with ClientSession(connector=TCPConnector(limit=0),
                                 timeout=ClientTimeout(total=60)) as http:
            async def one(i: int) -> None:
                while time.monotonic() < deadline:
                    started = time.perf_counter()
                    try:
                        async with http.get(base + PATHS[i % len(PATHS)]) as r:
                            await r.read()
                            codes[r.status] += 1
                            if r.status == 503:  # honour Retry-After, as a client should
                                await asyncio.sleep(float(r.headers.get("Retry-After", "1")))
                    except Exception:  # a benchmark counts failures, it does not stop
                        codes[0] += 1
                    latencies.append(time.perf_counter() - started)
            await asyncio.gather(*(one(i) for i in range(CLIENTS)))
        out.put((codes, latencies))
    asyncio.run(main())


Priority = Callable[[], AbstractAsyncContextManager[None]]


async def cycles(pipeline: IngestPipeline, n: int, priority: Priority,
                 gap: float) -> list[float]:
    """``n`` cycles ``gap`` seconds apart (production runs one a minute; the gap is where the
    API gets its turns), each as the app runs it (a priority tick: with the gate, no API
    request starts at the store while it runs)."""
    times = []
    for _ in range(n):
        await asyncio.sleep(gap)
        started = time.perf_counter()
        async with priority():
            await pipeline.run_cycle()
        times.append(time.perf_counter() - started)
    return times


async def phase(pipeline: IngestPipeline, base: str | None, n: int, seconds: float,
                gap: float, priority: Priority = nullcontext
                ) -> tuple[list[float], Counter[int], list[float]]:
    if base is None:
        return await cycles(pipeline, n, priority, gap), Counter(), []
    queue: Queue[tuple[Counter[int], list[float]]] = multiprocessing.Queue()
    load = multiprocessing.Process(target=clients, args=(base, seconds, queue), daemon=True)
    load.start()
    await asyncio.sleep(1.0)  # let the clients ramp up before the first measured cycle
    times = await cycles(pipeline, n, priority, gap)
    codes, latencies = await asyncio.to_thread(queue.get)
    load.join()
    return times, codes, latencies


def report(label: str, times: list[float], codes: Counter[int], latencies: list[float]) -> None:
    line = (f"{label:<34} cycle mean {statistics.fmean(times):6.3f} s  median "
            f"{statistics.median(times):6.3f} s  max {max(times):6.3f} s")
    if latencies:
        q = statistics.quantiles(latencies, n=100)
        line += (f"  API answers {dict(sorted(codes.items()))}  p50 {q[49]:.3f} s  "
                 f"p99 {q[98]:.3f} s")
    print(line, flush=True)


async def bench(port: int, targets: int, cards: int, days: int, n: int, gap: float) -> float:
    fleet = [Target(f"127.0.0.1:{port}", f"live-{i:05d}", metrics_path=f"/t/{i}/metrics")
             for i in range(targets)]
    with tempfile.TemporaryDirectory() as tmp:
        db = DuckDBDatabase(Path(tmp) / "load.duckdb")
        _generate(db, cards, days)
        scraper = Scraper(timeout=10, max_concurrency=64, max_response_bytes=10 << 20,
                          clock=system_clock)
        registry = CollectorRegistry()
        ctx = ApiContext(db=db, clock=system_clock, current_rule_version="v2-ecc-xid",
                         tokens=None, listen_host="127.0.0.1", registry=registry)
        ratios = {}
        async with scraper:
            ingestor = Ingestor(db, DedupCache(max_entries=2 * targets * 8),
                                keepalive=timedelta(minutes=5))
            pipeline = IngestPipeline(targets=lambda: fleet, scraper=scraper, ingestor=ingestor,
                                      clock=system_clock)
            await pipeline.run_cycle()  # cold: not measured
            alone = await phase(pipeline, None, n, 0, gap)
            report("alone", *alone)
            for label, gate in (("200 clients, API gate", ApiGate(ApiConfig(), registry)),
                                ("200 clients, no gate (reference)", None)):
                app = new_application(RequestMetrics(CollectorRegistry()), tokens=None,
                                      listen_host="127.0.0.1")
                add_api_routes(app, replace(ctx, gate=gate))
                runner = web.AppRunner(app, access_log=None)
                await runner.setup()
                site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
                await site.start()
                base = f"http://127.0.0.1:{runner.addresses[0][1]}"
                seconds = 3 + n * (gap + max(2.0, 4 * statistics.median(alone[0])))
                loaded = await phase(pipeline, base, n, seconds, gap,
                                     nullcontext if gate is None else gate.priority)
                await runner.cleanup()
                report(label, *loaded)
                # The mean, not the median: without the gate one cycle stalls behind the
                # queued requests for a minute and the rest run while the clients wait.
                ratios[label] = statistics.fmean(loaded[0]) / statistics.fmean(alone[0])
        db.close()
    for label, ratio in ratios.items():
        print(f"ratio {label}: {ratio:.2f}x the cycle alone")
    return ratios["200 clients, API gate"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--gap", type=float, default=1.0,
                        help="seconds between cycles (production: the 60 s interval less the "
                             "cycle); 0 runs them back to back and leaves the API no turn")
    args = parser.parse_args(argv)
    targets, cards, days, n = (100, 256, 3, 5) if args.quick else (1000, 2048, 7, 8)
    ports: Queue[int] = multiprocessing.Queue()
    fleet = multiprocessing.Process(target=serve, args=(ports, targets, 8), daemon=True)
    fleet.start()
    try:
        ratio = asyncio.run(bench(ports.get(timeout=60), targets, cards, days, n, args.gap))
    finally:
        fleet.terminate()
    if ratio <= 1.5:
        print("targets met")
        return 0
    print(f"TARGET MISSED: ingest cycle under 200 API clients {ratio:.2f}x the cycle alone "
          "(target 1.5x)")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
