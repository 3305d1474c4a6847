"""Load shedding of the read API: a bounded number of requests at the store, a
bounded queue, then 503 with Retry-After, over real HTTP; the health endpoints never wait."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gpu_health.errors import ApiError, ConfigError
from gpu_health.evaluator.config.api import ApiConfig
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.http.api.gate import ApiGate
from gpu_health.evaluator.store import Database
from tests.evaluator.api_support import dataset_db, make_ctx, serve

PATH = "/api/v1/gpu-health/capabilities"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    yield from dataset_db(tmp_path_factory, "gate")


async def test_a_busy_api_answers_503_with_retry_after_and_serves_again_when_free(
        db: Database) -> None:
    registry = CollectorRegistry()
    gate = ApiGate(ApiConfig(max_concurrency=1, max_queue=0, queue_timeout=5), registry)
    async with serve(replace(make_ctx(db, registry=registry), gate=gate)) as client:
        async with gate.turn():  # another request holds the only turn
            response = await client.get(PATH)
            assert response.status == 503
            assert response.headers["Retry-After"] == "1"
            body = await response.json()
            assert body == {"error": "the API is busy (0 requests already waiting): retry "
                                     "later", "param": None}
        assert (await client.get(PATH)).status == 200
    assert registry.get_sample_value("gpu_health_evaluator_api_shed_total",
                                     {"reason": "queue_full"}) == 1


async def test_a_queued_request_waits_its_turn_or_gives_up_after_the_queue_timeout() -> None:
    registry = CollectorRegistry()
    gate = ApiGate(ApiConfig(max_concurrency=1, max_queue=4, queue_timeout=0.2), registry)
    order: list[str] = []

    async def request(name: str) -> None:
        async with gate.turn():
            order.append(name)

    async with gate.turn():
        waiting = asyncio.create_task(request("queued"))
        await asyncio.sleep(0)  # let it reach the queue
        assert registry.get_sample_value("gpu_health_evaluator_api_queued") == 1
    await waiting  # the turn was given back: the queued request ran
    assert order == ["queued"]
    async with gate.turn():
        with pytest.raises(ApiError) as late:
            await request("late")
    assert late.value.status == 503 and late.value.retry_after == 1
    assert registry.get_sample_value("gpu_health_evaluator_api_shed_total",
                                     {"reason": "wait_timeout"}) == 1


def test_the_limits_are_config_keys_checked_with_the_others(tmp_path: Path) -> None:
    config = parse_config({"api": {"max_concurrency": 4, "max_queue": 8,
                                   "queue_timeout": "2s"}}, base=tmp_path)
    assert config.api == ApiConfig(max_concurrency=4, max_queue=8, queue_timeout=2.0, timeout=30.0)
    with pytest.raises(ConfigError) as caught:
        parse_config({"api": {"max_concurrency": 0, "max_qeue": 1}}, base=tmp_path)
    text = " ".join(caught.value.problems)
    assert "api.max_concurrency" in text and "max_qeue" in text


async def test_store_work_longer_than_the_timeout_is_a_503_not_a_hang() -> None:
    """Before: API calls hung up to 40 s on a frozen database."""
    registry = CollectorRegistry()
    gate = ApiGate(ApiConfig(max_concurrency=1, timeout=0.1), registry)
    frozen = asyncio.Event()  # never set: the store does not answer
    with pytest.raises(ApiError) as caught:
        async with gate.turn():
            await frozen.wait()
    assert caught.value.status == 503 and "did not answer within 0.1s" in str(caught.value)
    async with gate.turn():  # the turn was given back
        pass
    assert registry.get_sample_value("gpu_health_evaluator_api_shed_total",
                                     {"reason": "timeout"}) == 1


async def test_an_ingest_or_worker_tick_goes_before_api_requests() -> None:
    """A priority loop's tick holds the gate: an API request waits for it (the collection
    keeps its interval under any number of clients), then gets its turn."""
    from gpu_health.evaluator.app import EvaluatorApp

    gate = ApiGate(ApiConfig(max_concurrency=1, queue_timeout=5), CollectorRegistry())
    app = EvaluatorApp(start_loops=False)
    app.priority = gate.priority
    order: list[str] = []
    release = asyncio.Event()

    async def ingest() -> None:
        order.append("cycle starts")
        await release.wait()
        order.append("cycle ends")

    async def api_request() -> None:
        async with gate.turn():
            order.append("api request")

    app.add_loop("ingest", 60, ingest, priority=True)
    tick = asyncio.create_task(app.run_tick("ingest"))
    await asyncio.sleep(0)  # the cycle is running
    request = asyncio.create_task(api_request())
    await asyncio.sleep(0.05)
    assert order == ["cycle starts"]  # the request waits for the cycle
    release.set()
    await asyncio.gather(tick, request)
    assert order == ["cycle starts", "cycle ends", "api request"]


async def test_a_request_queued_behind_another_still_waits_for_a_tick_that_starts_meanwhile(
) -> None:
    """The gate is checked when a request gets its turn, not only when it joins the queue:
    requests released at the end of one cycle must not start at the store during the next
    (bench/api_load.py: back-to-back ticks ran 2.4x slower while the 32 released requests
    took their turns one by one)."""
    gate = ApiGate(ApiConfig(max_concurrency=1, max_queue=8, queue_timeout=5),
                   CollectorRegistry())
    order: list[str] = []

    async def request(name: str) -> None:
        async with gate.turn():
            order.append(name)
            await asyncio.sleep(0.01)

    async def ticks() -> None:
        async with gate.priority():
            await asyncio.sleep(0.01)
        async with gate.priority():  # back to back, as a cycle then the worker's tick
            await asyncio.sleep(0.05)
            order.append("second tick ends")

    tick = asyncio.create_task(ticks())
    await asyncio.sleep(0)
    requests = [asyncio.create_task(request(f"r{i}")) for i in range(3)]
    await asyncio.gather(tick, *requests)
    assert order == ["second tick ends", "r0", "r1", "r2"]
