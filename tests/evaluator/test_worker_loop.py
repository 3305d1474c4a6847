"""The asyncio loop around the worker: start-up refusal, the one catch-all, self-metrics.

No test waits for time: the injected clock sets the stop event from inside the tick, so ``run``
returns right after its first tick.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from evaluator.rules.registry import register_ruleset
from evaluator.store import Database
from evaluator.worker import Worker, WorkerMetrics
from gpu_health.errors import RuleError
from tests.evaluator.rules_support import (
    at,
    const,
    insert_prediction,
    load,
    open_db,
    quadratic,
    ruleset,
    series,
)

NOW = at(12) + timedelta(minutes=10)


def stopping_clock(stop: asyncio.Event, now: datetime = NOW) -> Callable[[], datetime]:
    """Call 1 is the start-up registration, call 2 the first tick: stop after that tick."""
    loop = asyncio.get_running_loop()
    calls = []

    def clock() -> datetime:
        calls.append(now)
        if len(calls) >= 2:
            loop.call_soon_threadsafe(stop.set)  # the tick runs on a database thread
        return now

    return clock


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def degrading_db(tmp_path: Path) -> Database:
    db = open_db(tmp_path)
    load(db, series("n1", 0, "GPU-a", start=-8, end=30, corrected=quadratic(2, onset=0),
                    uncorrected=const(0)))
    return db


async def test_run_ticks_and_reports_metrics(tmp_path: Path) -> None:
    db = degrading_db(tmp_path)
    stop = asyncio.Event()
    registry = CollectorRegistry()
    worker = Worker(db, ruleset(), stopping_clock(stop), registry=registry)
    await asyncio.wait_for(worker.run(stop), timeout=60)
    assert value(registry, "gpu_health_evaluator_worker_ticks_total") == 1
    assert value(registry, "gpu_health_evaluator_worker_last_success_timestamp_seconds") == \
        NOW.timestamp()
    assert value(registry, "gpu_health_evaluator_predictions_created_total",
                 source="real", layer="trend") == 1
    assert value(registry, "gpu_health_evaluator_worker_cards_evaluated", source="real") == 1
    assert db.fetchone("SELECT count(*) FROM gpu_health_rule_versions")[0] == 1
    db.close()


async def test_a_failing_tick_is_counted_and_the_loop_survives(tmp_path: Path) -> None:
    db = degrading_db(tmp_path)
    stop = asyncio.Event()
    registry = CollectorRegistry()
    worker = Worker(db, ruleset(), stopping_clock(stop), registry=registry)
    worker.register(NOW)
    for statement in ("DROP INDEX idx_predictions_card", "DROP INDEX idx_predictions_status",
                      "DROP TABLE gpu_health_predictions"):  # a DB error mid-flight
        db.execute(statement)
    await asyncio.wait_for(worker.run(stop), timeout=60)
    assert value(registry, "gpu_health_evaluator_loop_errors_total",
                 loop="worker", reason="query") == 1
    assert await worker.run_once() is None
    assert value(registry, "gpu_health_evaluator_loop_errors_total",
                 loop="worker", reason="query") == 2
    assert value(registry, "gpu_health_evaluator_worker_ticks_total") == 0
    db.close()


async def test_unexpected_errors_are_counted_too(tmp_path: Path) -> None:
    db = degrading_db(tmp_path)
    registry = CollectorRegistry()

    def broken_clock() -> datetime:
        raise ValueError("clock exploded")

    worker = Worker(db, ruleset(), broken_clock, registry=registry)
    assert await worker.run_once() is None
    assert value(registry, "gpu_health_evaluator_loop_errors_total",
                 loop="worker", reason="unexpected") == 1
    db.close()


async def test_changed_rule_file_is_refused_before_any_tick(tmp_path: Path) -> None:
    db = degrading_db(tmp_path)
    register_ruleset(db, ruleset(), NOW)
    insert_prediction(db, pid="old", node="n1", gpu=0, uuid="GPU-a", t0=at(1))
    # Same version name, other parameters: simulate an in-place edit of the YAML file.
    edited = ruleset(min_increase=16)
    tampered = type(edited)(**{**{f: getattr(edited, f) for f in edited.__slots__},
                               "version": "v1-ecc-growth"})
    stop = asyncio.Event()
    worker = Worker(db, tampered, stopping_clock(stop))
    with pytest.raises(RuleError, match="min_increase: stored 32, now 16"):
        await asyncio.wait_for(worker.run(stop), timeout=60)
    assert db.fetchone("SELECT count(*) FROM gpu_health_predictions")[0] == 1
    db.close()


def test_shared_loop_error_counter_can_be_passed_in() -> None:
    registry = CollectorRegistry()
    shared = Counter("gpu_health_evaluator_loop_errors", "Failed loop iterations.",
                     ["loop", "reason"], registry=registry)
    metrics = WorkerMetrics(registry, loop_errors=shared)
    assert metrics.loop_errors is shared
