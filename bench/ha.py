"""Benchmark: several evaluators on one PostgreSQL: ingest shared by two replicas,
and the failover time.

1. Ingest: the stand-in fleet of ``bench.ingest`` (2,000 targets x 8 GPUs, one aiohttp process)
   scraped by two replica processes, each its rendezvous share, writing to one PostgreSQL; then,
   as the reference in the same run, one process scraping all of it into DuckDB, and one into
   PostgreSQL. Per phase (cold, then steady cycles with 1 % of the cards changed): seconds per
   cycle (the slower replica) and cards per second.
2. Failover: two ``gpu-health-evaluator run`` processes (lease TTL 5 s, a worker tick every 3 s)
   over 50 stand-in targets; the leader is killed with SIGKILL; printed: seconds until the
   other holds the lease, and until its first completed worker tick.

    python -m bench.ha            # 2,000 x 8, five steady cycles, then the failover
    python -m bench.ha --quick    # 200 x 8
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml
from aiohttp import ClientSession

from bench.ingest import serve
from gpu_health.clock import system_clock
from gpu_health.evaluator.cluster.assign import mine
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.scrape import Scraper
from gpu_health.evaluator.ingest.scrape_tick import IngestPipeline
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.engines.postgres import PostgresDatabase
from tests.postgres import PASSWORD, PostgresServer, postgres_server

REPO = Path(__file__).resolve().parents[1]


def fleet(port: int, targets: int) -> list[Target]:
    return [Target(f"127.0.0.1:{port}", f"node-{i:05d}", metrics_path=f"/t/{i}/metrics")
            for i in range(targets)]


def replica(store: str, share: list[Target], cycles: int, pipe: Connection) -> None:
    """One evaluator's ingest (own process): cold cycle, then a cycle per 'go' message."""
    async def run() -> None:
        db: Database = PostgresDatabase(store) if store.startswith("postgresql") else \
            DuckDBDatabase(store)
        scraper = Scraper(timeout=10, max_concurrency=64, max_response_bytes=10 << 20,
                          clock=system_clock)
        async with scraper:
            ingestor = Ingestor(db, DedupCache(max_entries=2 * len(share) * 8),
                                keepalive=timedelta(minutes=5))
            pipeline = IngestPipeline(targets=lambda: share, scraper=scraper, ingestor=ingestor,
                                      clock=system_clock)
            for _ in range(cycles + 1):
                pipe.recv()
                started = time.perf_counter()
                report = await pipeline.run_cycle()
                pipe.send((time.perf_counter() - started, report.cards, report.rows_written))
        db.close()

    asyncio.run(run())


def ingest_phase(label: str, stores: list[str], shares: list[list[Target]], port: int,
                 cycles: int) -> None:
    pipes, procs = [], []
    for store, share in zip(stores, shares, strict=True):
        ours, theirs = multiprocessing.Pipe()
        proc = multiprocessing.Process(target=replica, args=(store, share, cycles, theirs))
        proc.start()
        pipes.append(ours)
        procs.append(proc)

    async def bump() -> None:
        async with ClientSession() as http, http.get(
                f"http://127.0.0.1:{port}/bump", params={"fraction": "0.01"}) as r:
            await r.read()

    for n in range(cycles + 1):
        if n:
            asyncio.run(bump())
        for pipe in pipes:
            pipe.send("go")
        results = [pipe.recv() for pipe in pipes]
        seconds = max(r[0] for r in results)
        cards = sum(r[1] for r in results)
        rows = sum(r[2] for r in results)
        phase = "cold" if n == 0 else f"steady #{n}"
        print(f"  {label:<34} {phase:<10} {seconds:6.2f} s  cards {cards:6d}  "
              f"{cards / seconds:8.0f} cards/s  rows {rows:6d}", flush=True)
    for proc in procs:
        proc.join(60)


def ingest(server: PostgresServer, targets: int, cycles: int, tmp: Path) -> None:
    queue: Any = multiprocessing.Queue()
    fleet_proc = multiprocessing.Process(target=serve, args=(queue, targets, 8), daemon=True)
    fleet_proc.start()
    port = int(queue.get(timeout=120))
    everything = fleet(port, targets)
    members = ["replica-a", "replica-b"]
    shares = [mine(everything, members, m) for m in members]
    print(f"ingest: {targets} targets x 8 GPUs; shares {[len(s) for s in shares]}", flush=True)
    shared = server.url(server.new_database())
    PostgresDatabase(shared).close()  # migrate once before both start
    ingest_phase("two replicas, one PostgreSQL", [shared, shared], shares, port, cycles)
    alone = server.url(server.new_database())
    PostgresDatabase(alone).close()
    ingest_phase("reference: one process, PostgreSQL", [alone], [everything], port, cycles)
    ingest_phase("reference: one process, DuckDB", [str(tmp / "ref.duckdb")], [everything],
                 port, cycles)
    fleet_proc.terminate()


def _metric(base: str, name: str) -> float | None:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def _lease(url: str) -> tuple[str, int] | None:
    db = PostgresDatabase(url, application_name="bench-observer")
    try:
        row = db.fetchone("SELECT holder, token FROM gpu_health_leases WHERE name = 'leader' "
                          "AND expires_at > now()")
    finally:
        db.close()
    return None if row is None else (str(row[0]), int(row[1]))


def _until(probe: Any, deadline_s: float) -> Any:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = probe()
        if value:
            return value
        time.sleep(0.05)  # polling an outside process
    raise SystemExit("timed out")


def failover(server: PostgresServer, tmp: Path, ttl: float = 5.0) -> None:
    queue: Any = multiprocessing.Queue()
    fleet_proc = multiprocessing.Process(target=serve, args=(queue, 50, 8), daemon=True)
    fleet_proc.start()
    port = int(queue.get(timeout=60))
    database = server.new_database()
    (tmp / "pw").write_text(PASSWORD)
    ports = {"a": 19936, "b": 19937}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for member, web in ports.items():
        config = tmp / f"{member}.yml"
        config.write_text(yaml.safe_dump({
            "scrape": {"interval": "5s", "timeout": "4s"},
            "static_configs": [{"targets": [f"127.0.0.1:{port}"],
                                "labels": {"node": "bench-node"}}],
            "storage": {"url": server.url(database, password=False),
                        "password_file": str(tmp / "pw")},
            "ha": {"lease_ttl": f"{ttl:g}s", "member_id": member},
            "web": {"listen_address": f"127.0.0.1:{web}"},
            "alerting": {"enabled": False},
            "rules": {"dir": str(REPO / "rules")}}))
        procs[member] = subprocess.Popen(
            [str(Path(sys.executable).parent / "gpu-health-evaluator"), "run",
             f"--config={config}"], env={**os.environ, "GPU_HEALTH_RULE_SCAN_INTERVAL_MINUTES":
                                          "0.05"}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
    url = server.url(database)
    holder, _ = _until(lambda: _lease(url), 60)
    other = next(m for m in ports if m != holder)
    base = f"http://127.0.0.1:{ports[other]}"
    _until(lambda: _metric(base, "gpu_health_evaluator_leader") is not None, 30)
    before = _metric(base, "gpu_health_evaluator_worker_ticks_total") or 0.0
    killed = time.monotonic()
    procs[holder].send_signal(signal.SIGKILL)
    _until(lambda: (_lease(url) or ("", 0))[0] == other, 60)
    leased = time.monotonic() - killed
    _until(lambda: (_metric(base, "gpu_health_evaluator_worker_ticks_total") or 0) > before, 60)
    ticked = time.monotonic() - killed
    print(f"failover (lease TTL {ttl:g} s, worker tick every 3 s): new leader after "
          f"{leased:.1f} s ({leased / ttl:.2f} x TTL), its first completed tick after "
          f"{ticked:.1f} s", flush=True)
    for proc in procs.values():
        proc.kill()
        proc.wait(10)
    fleet_proc.terminate()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--targets", type=int, default=2000)
    parser.add_argument("--cycles", type=int, default=5)
    args = parser.parse_args(argv)
    targets = 200 if args.quick else args.targets
    with tempfile.TemporaryDirectory(prefix="gpu-health-bench-ha-") as tmp, \
            postgres_server() as server:
        ingest(server, targets, args.cycles, Path(tmp))
        failover(server, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
