"""Benchmark: the read API's store work on a large store, per endpoint.

Generates cards x days of 5-minute samples (288 rows per card per day, the keep-alive upper
bound) INSIDE DuckDB with one ``INSERT ... SELECT FROM range(...)`` per day, into a store opened
through ``Database`` (so the schema's indexes exist), plus a few thousand predictions. Then
times, over a few repetitions, what each endpoint does in its one ``db.run`` call: the
capability matrix (one GROUP BY over every sample), one card's samples (newest 5000 and
20000), its 7-day ECC rate (ASOF JOIN of 168 hour boundaries), a page of predictions, and the
node visibility check. Also one full HTTP round trip per endpoint through a real server.

    python -m bench.api            # 4096 cards x 37 days (~43.6 M rows; a few GB of disk)
    python -m bench.api --quick    # 256 cards x 10 days, seconds
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from gpu_health.clock import to_naive_utc
from gpu_health.evaluator.http.access import new_application
from gpu_health.evaluator.http.api.context import ApiContext
from gpu_health.evaluator.http.api.routes import add_api_routes
from gpu_health.evaluator.http.errors import RequestMetrics
from gpu_health.evaluator.model import CardKey
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.rollups import seal
from gpu_health.evaluator.store.statistics import api_queries as q

NOW = datetime(2026, 3, 1, tzinfo=UTC)
_DAY = """
INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, sampled_at,
                                ecc_uncorrected_total, ecc_corrected_total, retired_pages,
                                remapped_rows_pending, remapped_rows_failure)
SELECT 'node-' || lpad((c // 8)::VARCHAR, 4, '0'), (c % 8)::INTEGER, 'GPU-' || c, 'real',
       $start + to_seconds(i * 300),
       CASE WHEN c % 50 = 0 THEN NULL ELSE (c % 3 = 0 AND i > 200)::BIGINT END,
       CASE WHEN c % 50 = 0 THEN NULL ELSE c % 13 + $day * 288 + i END,
       NULL, 0, 0
FROM range($cards) AS r(c), range(288) AS s(i)
"""


def _generate(db: Database, cards: int, days: int) -> int:
    start = NOW - timedelta(days=days)
    for day in range(days):
        day_start = to_naive_utc(start + timedelta(days=day))
        db.execute(_DAY, {"start": day_start, "cards": cards, "day": day})
    db.execute(
        "INSERT INTO gpu_health_nodes (node_id, tenant, target, last_seen) "
        "SELECT DISTINCT node_id, 'tenant-' || (hash(node_id) % 8), node_id || ':10346', $now "
        "FROM gpu_health_samples", {"now": to_naive_utc(NOW)})
    db.execute(
        "INSERT INTO gpu_health_predictions SELECT 'p' || i, 'node-' || lpad((i % 512)::VARCHAR,"
        " 4, '0'), i % 8, 'GPU-' || i, 'real', 'v1-ecc-growth', 7, $now - to_hours(i), "
        "$now - to_hours(i) + INTERVAL 7 DAY, $now - to_hours(i), 'corrected_growth', 'trend', "
        "'{}', 0, 'pending', NULL, NULL, false FROM range(5000) AS r(i)",
        {"now": to_naive_utc(NOW)})
    return int(db.fetchone("SELECT count(*) FROM gpu_health_samples")[0])


def _time(label: str, fn: Callable[[], object], repeat: int) -> None:
    fn()  # warm-up: first touch of the file's blocks
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    print(f"{label:<46} median {statistics.median(runs) * 1000:8.1f} ms   "
          f"max {max(runs) * 1000:8.1f} ms   ({repeat} runs)")


async def _http(db: Database, paths: list[str]) -> None:
    ctx = ApiContext(db=db, clock=lambda: NOW, current_rule_version="v1-ecc-growth", tokens=None,
                     listen_host="127.0.0.1", registry=CollectorRegistry())
    app = new_application(RequestMetrics(ctx.registry), tokens=None, listen_host="127.0.0.1")
    add_api_routes(app, ctx)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for path in paths:
            t0 = time.perf_counter()
            async with client.get(path) as response:
                body = await response.read()
            ms = (time.perf_counter() - t0) * 1000
            print(f"HTTP {response.status} {path[:60]:<60} {ms:8.1f} ms {len(body):>10} bytes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    cards, days = (256, 10) if args.quick else (4096, 37)
    with tempfile.TemporaryDirectory() as tmp:
        db = DuckDBDatabase(Path(tmp) / "bench.duckdb", threads=2)
        t0 = time.perf_counter()
        rows = _generate(db, cards, days)
        print(f"generated {rows:,} samples ({cards} cards x {days} days) in "
              f"{time.perf_counter() - t0:.1f} s (not part of any timing below)")
        t0 = time.perf_counter()
        seal(db, NOW)  # as the live worker does: every complete day summarised
        print(f"summarised {days} days in {time.perf_counter() - t0:.1f} s (not timed below)")
        key = CardKey("node-0001", 3)
        week = NOW - timedelta(days=7)
        _time("capabilities (all cards, one GROUP BY)",
              lambda: q.capabilities(db, source="real", now=NOW), args.repeat)
        _time("capabilities (one node)",
              lambda: q.capabilities(db, source="real", now=NOW, node_id="node-0001"),
              args.repeat)
        _time("samples: 1 card, 7 days, newest 5000",
              lambda: q.card_samples(db, key, since=week, until=NOW, limit=5000), args.repeat)
        _time("samples: 1 card, 37 days, newest 20000",
              lambda: q.card_samples(db, key, since=NOW - timedelta(days=37), until=NOW,
                                     limit=20000), args.repeat)
        _time("ecc-rate boundaries: 1 card, 168 hours",
              lambda: q.ecc_boundaries(db, key, start=week, end=NOW, lookback_minutes=60),
              args.repeat)
        _time("predictions page (100 of 5000)", lambda: q.predictions_page(db, q.PredictionFilter(
            source="real", until=NOW, limit=100, offset=0)), args.repeat)
        _time("predictions page, tenant-filtered", lambda: q.predictions_page(
            db, q.PredictionFilter(source="real", until=NOW, limit=100, offset=0,
                                   tenants=("tenant-1", "tenant-2"))), args.repeat)
        _time("node visibility (unknown node, full check)",
              lambda: q.node_visible(db, "no-such-node", None), args.repeat)
        base = "/api/v1/gpu-health"
        card = "node_id=node-0001&gpu_index=3"
        asyncio.run(_http(db, [f"{base}/capabilities", f"{base}/predictions",
                               f"{base}/samples?{card}", f"{base}/ecc-rate?{card}"]))
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
