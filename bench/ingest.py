"""Ingest benchmark: one evaluator process scraping a fleet of stand-in exporters over real HTTP.

    python bench/ingest.py            # 2,000 targets x 8 GPUs (16,000 cards)
    python bench/ingest.py --quick    # 100 targets x 8 GPUs
    python bench/ingest.py --quick --nvlink   # each card also with 18 NVLink links' errors

The stand-in exporters are one aiohttp server in a separate process (``/t/<i>/metrics``, gzip,
about 100 lines per target like the real exporter), so this process measures the evaluator
alone: the production ``IngestPipeline`` (scrape, parse, write rule, dedup cache, DuckDB).
Phases: parse-only throughput; a cold cycle (empty DB and cache); steady cycles with a cache
sized to the fleet; the same with every answer parsed in full (no parse memo: the reference in
the same run); steady cycles with a 4,096-entry cache, smaller than the fleet (misses every
cycle, one batched SELECT; the default fits 100,000 cards). Between steady cycles 1% of the
cards change one counter (plus one cycle where nothing changed: zero statements). Targets:
steady < 10 s, cold < 5 s for 2,000 x 8. ``--nvlink`` adds what an NVLink card exports beside
(``gpu_health_nvlink_errors_total`` for 18 links x 3 counters, and the card's total): run it
and the plain fleet to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import multiprocessing
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.queues import Queue
from pathlib import Path

from aiohttp import ClientSession, web
from prometheus_client.parser import text_string_to_metric_families

from bench.loopback import FullParse, run_server
from gpu_health.clock import system_clock
from gpu_health.contract import (
    COUNTER_KEYS,
    METRIC_NAMES,
    METRIC_TYPES,
    NVLINK_CARD_METRIC,
    NVLINK_COUNTERS,
    NVLINK_ERRORS_METRIC,
)
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cards import parse_cards
from gpu_health.evaluator.ingest.cycle import CycleReport, Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.parse_memo import ParseMemo
from gpu_health.evaluator.ingest.retention import Retention
from gpu_health.evaluator.ingest.scrape import Scraper, ScrapeResult
from gpu_health.evaluator.ingest.scrape_tick import IngestPipeline
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase

SMALL_CACHE = 4096  # the dedup cache's default before it was sized for 100,000 cards
# What prometheus_client's default collectors and the exporter's self-metrics add per target.
_EXTRA = "".join(
    f"# HELP python_gc_objects_collected_total Objects collected during gc\n"
    f"# TYPE python_gc_objects_collected_total counter\n"
    f'python_gc_objects_collected_total{{generation="{g}"}} {1234 + g}.0\n'
    for g in range(3)
) + "".join(
    f'gpu_health_exporter_collect_success{{vendor="{v}"}} 1.0\n'
    f'gpu_health_exporter_collect_duration_seconds{{vendor="{v}"}} 0.0{i + 3}\n'
    f'gpu_health_exporter_last_success_timestamp_seconds{{vendor="{v}"}} 1.7e+09\n'
    f'gpu_health_exporter_field_supported{{vendor="{v}",field="ecc.errors.corrected"}} 1.0\n'
    for i, v in enumerate(("nvidia", "kunlunxin", "cambricon"))
) + "".join(f"process_metric_{i} {i}.5\n" for i in range(30))


def render(target: int, gpus: int, generation: dict[tuple[int, int], int],
           nvlink: bool = False) -> bytes:
    lines: list[str] = [] if not nvlink else nvlink_lines(target, gpus)
    for key in COUNTER_KEYS:
        name = METRIC_NAMES[key]
        lines.append(f"# HELP {name} {key}\n# TYPE {name} {METRIC_TYPES[key]}\n")
        for gpu in range(gpus):
            if key == "retired_pages":
                continue  # Ampere: unknown, so absent
            value = generation.get((target, gpu), 0) if key == "ecc_corrected_total" else 0
            lines.append(f'{name}{{gpu="{gpu}",uuid="GPU-{target:05d}-{gpu}",'
                         f'vendor="nvidia"}} {value}.0\n')
    lines.append("# HELP gpu_health_gpu_info Cards.\n# TYPE gpu_health_gpu_info gauge\n")
    lines.extend(f'gpu_health_gpu_info{{gpu="{g}",model="NVIDIA A100-SXM4-80GB",'
                 f'uuid="GPU-{target:05d}-{g}",vendor="nvidia"}} 1.0\n' for g in range(gpus))
    return gzip.compress(("".join(lines) + _EXTRA).encode(), compresslevel=1)


def nvlink_lines(target: int, gpus: int) -> list[str]:
    """Each card's 18 links x 3 NVLink error counters and its total, all 0."""
    cards = [f'gpu="{g}",uuid="GPU-{target:05d}-{g}",vendor="nvidia"' for g in range(gpus)]
    lines = [f"# HELP {NVLINK_ERRORS_METRIC} NVLink errors.\n"
             f"# TYPE {NVLINK_ERRORS_METRIC} counter\n"]
    lines += [f'{NVLINK_ERRORS_METRIC}{{{card},link="{link}",counter="{counter}"}} 0.0\n'
              for card in cards for link in range(18) for counter in NVLINK_COUNTERS]
    lines.append(f"# HELP {NVLINK_CARD_METRIC} Total.\n# TYPE {NVLINK_CARD_METRIC} counter\n")
    return lines + [f"{NVLINK_CARD_METRIC}{{{card}}} 0.0\n" for card in cards]


def serve(port_queue: Queue[int], targets: int, gpus: int, nvlink: bool = False) -> None:
    """The stand-in fleet (runs in its own process)."""
    generation: dict[tuple[int, int], int] = {}
    bodies = [render(t, gpus, generation, nvlink) for t in range(targets)]
    rng = random.Random(1)

    async def metrics(request: web.Request) -> web.Response:
        body = bodies[int(request.match_info["i"])]
        return web.Response(body=body, headers={"Content-Encoding": "gzip",
                                                "Content-Type": "text/plain; version=0.0.4"})

    async def bump(request: web.Request) -> web.Response:
        cards = [(t, g) for t in range(targets) for g in range(gpus)]
        chosen = rng.sample(cards, int(len(cards) * float(request.query["fraction"])))
        for card in chosen:
            generation[card] = generation.get(card, 0) + 1
        for t in {t for t, _ in chosen}:
            bodies[t] = render(t, gpus, generation, nvlink)
        return web.json_response({"changed": len(chosen)})

    run_server(port_queue, {"/t/{i}/metrics": metrics, "/bump": bump})


class TimedScraper(Scraper):
    """Records how long the scrape-and-parse half of a cycle took."""

    last_seconds = 0.0

    async def scrape_all(self, targets: Sequence[Target]) -> list[ScrapeResult]:
        started = time.perf_counter()
        results = await super().scrape_all(targets)
        self.last_seconds = time.perf_counter() - started
        return results


@dataclass
class Row:
    phase: str
    seconds: float
    scrape_s: float
    report: CycleReport
    statements: int


def print_row(row: Row) -> None:
    r = row.report
    print(f"{row.phase:<28} {row.seconds:7.2f} s  (scrape+parse {row.scrape_s:5.2f} s)  "
          f"cards {r.cards:6d}  samples/s {r.cards / row.seconds:9.0f}  rows {r.rows_written:6d}"
          f"  rows/s {r.rows_written / row.seconds:9.0f}  SELECTs {r.selects}  "
          f"statements {row.statements}  hits {r.hits} misses {r.misses}", flush=True)


async def bench(port: int, targets: int, gpus: int, cycles: int, changed: float) -> list[Row]:
    fleet = [Target(f"127.0.0.1:{port}", f"node-{i:05d}", metrics_path=f"/t/{i}/metrics")
             for i in range(targets)]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = DuckDBDatabase(Path(tmp) / "bench.duckdb")
        scraper = TimedScraper(timeout=10, max_concurrency=64, max_response_bytes=10 << 20,
                               clock=system_clock)
        async with scraper, ClientSession() as control:
            await parse_only(scraper, fleet)
            retention = Retention(db, days=180, clock=system_clock)
            ingestor = Ingestor(db, DedupCache(max_entries=2 * targets * gpus),
                                keepalive=timedelta(minutes=5),
                                on_written=retention.note_written)
            pipeline = IngestPipeline(targets=lambda: fleet, scraper=scraper, ingestor=ingestor,
                                      clock=system_clock)
            rows.append(await cycle(pipeline, db, "cold (empty DB and cache)"))
            await retention.wait()
            for phase, cache in (("steady, cache >= fleet", None),
                                 ("steady, no parse memo", None),
                                 ("steady, 4096-entry cache", SMALL_CACHE)):
                scraper.memo = FullParse() if "no parse memo" in phase else ParseMemo()
                if cache is not None:
                    ingestor.cache = DedupCache(max_entries=cache)
                    pipeline.ingestor = ingestor
                for n in range(cycles):
                    async with control.get(f"http://127.0.0.1:{port}/bump",
                                           params={"fraction": str(changed)}) as r:
                        await r.read()
                    rows.append(await cycle(pipeline, db, f"{phase} #{n + 1}"))
                if phase == "steady, cache >= fleet":  # the steady state: nothing changed at all
                    rows.append(await cycle(pipeline, db, "steady, nothing changed"))
        db.close()
    return rows


async def cycle(pipeline: IngestPipeline, db: Database, phase: str) -> Row:
    before = db.statements
    started = time.perf_counter()
    report = await pipeline.run_cycle()
    seconds = time.perf_counter() - started
    scraper = pipeline.scraper
    scrape_s = scraper.last_seconds if isinstance(scraper, TimedScraper) else 0.0
    row = Row(phase, seconds, scrape_s, report, db.statements - before)
    print_row(row)
    if report.targets_up != report.targets:
        print(f"  warning: only {report.targets_up}/{report.targets} targets up", flush=True)
    return row


async def parse_only(scraper: Scraper, fleet: Sequence[Target]) -> None:
    texts: list[str] = []
    async with ClientSession() as http:
        for target in fleet:
            async with http.get(target.url) as response:
                texts.append(await response.text())
    lines = sum(t.count("\n") for t in texts)
    started = time.perf_counter()
    cards = sum(len(parse_cards(t).cards) for t in texts)
    seconds = time.perf_counter() - started
    print(f"{'parse only':<28} {seconds:7.2f} s  {len(texts)} expositions, {lines} lines: "
          f"{lines / seconds:,.0f} lines/s, {cards / seconds:,.0f} cards/s", flush=True)
    memo = ParseMemo()
    for text in texts:  # the first scrape of each target fills its entry
        memo.parse("t", text)
    started = time.perf_counter()
    for i, text in enumerate(texts):
        memo.parse(str(i), text)
        memo.parse(str(i), text)
    seconds = (time.perf_counter() - started) / 2
    print(f"{'parse only, memo (unchanged)':<28} {seconds:7.2f} s  {lines / seconds:,.0f} "
          "lines/s (the second of two scrapes of the same answers)", flush=True)
    sample = texts[: max(1, len(texts) // 10)]
    started = time.perf_counter()
    for text in sample:
        list(text_string_to_metric_families(text))
    reference = time.perf_counter() - started
    sample_lines = sum(t.count("\n") for t in sample)
    print(f"{'  prometheus_client parser':<28} {sample_lines / reference:,.0f} lines/s on "
          f"{len(sample)} of them (for comparison)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 targets instead of 2,000")
    parser.add_argument("--targets", type=int, default=None)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=3, help="steady cycles per phase")
    parser.add_argument("--changed", type=float, default=0.01,
                        help="fraction of cards changing between cycles")
    parser.add_argument("--nvlink", action="store_true",
                        help="each card also exports 18 NVLink links' error counters")
    args = parser.parse_args(argv)
    targets = args.targets or (100 if args.quick else 2000)
    ctx = multiprocessing.get_context("spawn")
    port_queue: Queue[int] = ctx.Queue()
    server = ctx.Process(target=serve, args=(port_queue, targets, args.gpus, args.nvlink),
                         daemon=True)
    server.start()
    try:
        port = port_queue.get(timeout=120)
        print(f"fleet: {targets} targets x {args.gpus} GPUs = {targets * args.gpus} cards"
              f"{' with NVLink' if args.nvlink else ''}, "
              f"served by pid {server.pid}; evaluator pid {multiprocessing.current_process().pid}")
        rows = asyncio.run(bench(port, targets, args.gpus, args.cycles, args.changed))
    finally:
        server.terminate()
        server.join(10)
    cold = rows[0].seconds
    steady = max(r.seconds for r in rows if "cache >= fleet" in r.phase)
    small = max(r.seconds for r in rows if "4096" in r.phase)
    selects = {r.report.selects for r in rows if "4096" in r.phase}
    memo_on = sum(r.scrape_s for r in rows if "cache >= fleet" in r.phase)
    memo_off = sum(r.scrape_s for r in rows if "no parse memo" in r.phase)
    print(f"\nscrape + parse of the steady cycles: {memo_on:.2f} s with the parse memo, "
          f"{memo_off:.2f} s without (x{memo_off / memo_on:.2f})")
    print(f"summary: cold {cold:.2f} s (target < 5 s), steady {steady:.2f} s (target < 10 s), "
          f"steady with 4096 cache {small:.2f} s with {sorted(selects)} SELECT(s) per cycle")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
