"""Benchmark: /healthz while an http_sd answer of 20,000 targets is fetched, merged and scraped
(with 50,000 targets /healthz took 15 s twice a minute).

A real evaluator process (``gpu_health.evaluator.main --config``) runs twice in one run:
- reference: one static target, nothing to discover;
- http_sd: one ``http_sd_configs`` entry answering ``--targets`` (20,000, the default
  ``scrape.target_limit``) loopback addresses on a closed port, refreshed every 5 s, so the
  answer is fetched, validated and merged six times a minute and every ingest cycle scrapes (and
  fails) 20,000 targets.
This process asks ``/healthz`` every 50 ms for ``--seconds`` after ``/readyz`` says ready, and
prints each run's answer latencies (p50, p99, max) and the ratio of p99s. The http_sd server is
its own process. Target: every ``/healthz`` answered within 1 s (the default
``timeoutSeconds`` of a Kubernetes probe); the last line reads ``targets met`` or
``TARGET MISSED: <what>``.

    python -m bench.discovery            # 20,000 targets, 30 s per run
    python -m bench.discovery --quick    # 5,000 targets, 10 s per run
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.queues import Queue
from pathlib import Path

from aiohttp import web

REPO = Path(__file__).resolve().parent.parent
PROBE_TIMEOUT_S = 1.0
MAIN = "from gpu_health.evaluator.main import main; raise SystemExit(main())"


def sd_server(port_queue: Queue[int], targets: int) -> None:
    """The http_sd endpoint (its own process): one group per target, as a CMDB export has."""
    body = json.dumps([{"targets": [f"127.{1 + i // 65536}.{i // 256 % 256}.{i % 256}:1"],
                        "labels": {"rack": f"r{i // 64}"}} for i in range(targets)]).encode()

    async def sd(_request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/sd", sd)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_queue.put(int(runner.addresses[0][1]))
        await asyncio.Event().wait()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(port: int, path: str, timeout: float = 30.0) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    except OSError:
        return -1
    finally:
        conn.close()


def run(tmp: Path, sources: str, seconds: float) -> list[float]:
    """One evaluator process with ``sources``: /healthz latencies once it is ready."""
    port = _free_port()
    config = tmp / f"ev-{port}.yml"
    config.write_text(f"web: {{listen_address: '127.0.0.1:{port}'}}\n"
                      f"storage: {{path: ev-{port}.duckdb}}\nalerting: {{enabled: false}}\n"
                      + sources, encoding="utf-8")
    log = (tmp / f"ev-{port}.log").open("w")
    proc = subprocess.Popen([sys.executable, "-c", MAIN, "--config", str(config)],
                            cwd=tmp, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 120
        while _get(port, "/readyz", timeout=5) != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the evaluator did not get ready:\n"
                                 + Path(log.name).read_text()[-3000:])
            time.sleep(0.2)  # waiting for another process, not for time to pass
        latencies = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            status = _get(port, "/healthz")
            latencies.append(time.perf_counter() - started if status == 200 else float("inf"))
            time.sleep(0.05)
        return latencies
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def report(label: str, latencies: list[float]) -> float:
    q = statistics.quantiles(latencies, n=100)
    print(f"{label:<34} /healthz p50 {q[49] * 1000:7.1f} ms  p99 {q[98] * 1000:7.1f} ms  "
          f"max {max(latencies) * 1000:7.1f} ms  ({len(latencies)} asked)", flush=True)
    return q[98]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    targets, seconds = (5_000, 10.0) if args.quick else (20_000, 30.0)
    ports: Queue[int] = multiprocessing.Queue()
    server = multiprocessing.Process(target=sd_server, args=(ports, targets), daemon=True)
    server.start()
    try:
        sd_port = ports.get(timeout=60)
        with tempfile.TemporaryDirectory() as tmp:
            alone = run(Path(tmp), "static_configs: [{targets: ['127.0.0.1:1']}]\n", seconds)
            loaded = run(Path(tmp), "http_sd_configs: [{url: 'http://127.0.0.1:"
                         f"{sd_port}/sd', refresh_interval: 5s}}]\n", seconds)
    finally:
        server.terminate()
    p99_alone = report("reference (one static target)", alone)
    p99 = report(f"http_sd, {targets:,} targets every 5 s", loaded)
    print(f"ratio p99 http_sd / reference: {p99 / p99_alone:.2f}x")
    worst = max(loaded)
    if worst <= PROBE_TIMEOUT_S:
        print("targets met")
        return 0
    print(f"TARGET MISSED: a /healthz took {worst:.2f} s with {targets:,} discovered targets "
          f"(target: within {PROBE_TIMEOUT_S:g} s)")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
