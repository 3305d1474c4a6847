"""Scraping real HTTP stand-ins: bad targets are recorded, never break or delay the others."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.scrape import Scraper
from gpu_health.evaluator.selfmetrics import SelfMetrics
from tests.evaluator.ingest_support import Card, FakeClock, StandIn, a100, render, stand_in

TIMEOUT = 0.5
CAP = 1 << 20


@pytest.fixture
async def server() -> AsyncIterator[StandIn]:
    async with stand_in() as s:
        s.bodies["good"] = render([Card(0, "GPU-a", a100(3)), Card(1, "GPU-b", a100(4))])
        yield s


@pytest.fixture
async def scraper() -> AsyncIterator[Scraper]:
    async with Scraper(timeout=TIMEOUT, max_concurrency=4, max_response_bytes=CAP,
                       clock=FakeClock()) as s:
        yield s


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_good_target_with_gzip(server: StandIn, scraper: Scraper) -> None:
    result = await scraper.scrape(server.target("good"))
    assert result.ok, result.error
    assert [(c.gpu_index, c.counters.ecc_corrected_total) for c in result.extraction.cards] == [
        (0, 3), (1, 4)
    ]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("!hang", "timeout"),
        ("!500", "http_status"),
        ("!huge", "too_large"),
        ("!huge-declared", "too_large"),
        ("!gzip-bomb", "too_large"),
        ('gpu_health_ecc_corrected_total{gpu="0" 1\n', "parse"),
        (b"gpu_health_x 1\n# caf\xe9\n", "encoding"),
    ],
)
async def test_bad_target_is_one_failed_result(server: StandIn, scraper: Scraper,
                                               body: str | bytes, reason: str) -> None:
    server.bodies["bad"] = body
    result = await scraper.scrape(server.target("bad"))
    assert not result.ok and result.error_reason == reason, result.error
    assert result.error and result.extraction.cards == ()


async def test_dead_and_slow_targets_do_not_delay_the_others(server: StandIn,
                                                             scraper: Scraper) -> None:
    server.bodies["hang"] = "!hang"
    server.bodies["junk"] = "not exposition at all {"
    targets = [server.target("hang"), server.target("good"),
               Target(f"127.0.0.1:{_closed_port()}", "dead"), server.target("junk"),
               server.target("missing")]
    results = await scraper.scrape_all(targets)
    by_node = {r.target.node_id: r for r in results}
    assert [r.target.node_id for r in results] == ["hang", "good", "dead", "junk", "missing"]
    assert by_node["good"].ok and by_node["good"].duration < TIMEOUT
    assert by_node["hang"].error_reason == "timeout"
    assert by_node["dead"].error_reason == "connection"
    assert by_node["junk"].error_reason == "parse"
    assert by_node["missing"].error_reason == "http_status"


async def test_many_targets_are_scraped_by_a_bounded_set_of_workers_in_order(
        server: StandIn, scraper: Scraper) -> None:
    """Before: one task per target made 20,000 tasks in one step of the event loop. The
    scraper's workers (max_concurrency, 4 here) take the targets in turn, results in order."""
    server.bodies.update({f"g{i}": "gpu_health_x 1\n" for i in range(0, 40, 3)})
    targets = [server.target(f"g{i}") for i in range(40)]
    peak = 0

    async def watch() -> None:  # the scraper's own tasks (the stand-in's are the server's)
        nonlocal peak
        while True:
            ours = [t for t in asyncio.all_tasks()
                    if t.get_coro().__qualname__.startswith("Scraper.")]  # type: ignore[union-attr]
            peak = max(peak, len(ours))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    results = await scraper.scrape_all(targets)
    watcher.cancel()
    assert [r.target.node_id for r in results] == [f"g{i}" for i in range(40)]
    assert [r.ok for r in results] == [i % 3 == 0 for i in range(40)]
    assert peak == 4  # max_concurrency workers, not one task per target
    assert await scraper.scrape_all([]) == []


async def test_target_self_metrics_pass_promtool(server: StandIn, scraper: Scraper,
                                                 tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = SelfMetrics(registry)
    server.bodies["bad"] = "!500"
    for r in await scraper.scrape_all([server.target("good"), server.target("bad", node="b")]):
        metrics.target_result(r.target.url, r.target.node_id, r.duration, r.error_reason, 1.0)
    text = generate_latest(registry).decode()
    good, bad = server.target("good").url, server.target("bad").url
    assert f'gpu_health_evaluator_target_up{{node="good",target="{good}"}} 1.0' in text
    assert f'gpu_health_evaluator_target_up{{node="b",target="{bad}"}} 0.0' in text
    assert (f'gpu_health_evaluator_target_last_error_info{{reason="http_status",target="{bad}"}}'
            in text)
    assert 'gpu_health_evaluator_scrape_errors_total{reason="http_status"} 1.0' in text
    metrics.forget_targets([good])
    assert bad not in generate_latest(registry).decode()
    check = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                           capture_output=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
