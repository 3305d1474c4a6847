"""Retention: every N real writes, in its own task with its own timeout, never deleting on typos."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from gpu_health.evaluator.config.file import retention_days_from_env
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cards import CardExtraction, CardReading
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.retention import Retention
from gpu_health.evaluator.ingest.scrape import ScrapeResult
from gpu_health.evaluator.model import CardKey, Sample
from gpu_health.evaluator.selfmetrics import SelfMetrics
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.cycles import write_cycle
from tests.conftest import NewDb
from tests.evaluator.ingest_support import FakeClock, a100
from tests.evaluator.store_support import count_samples

DAY = timedelta(days=1)


@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    database = new_db("retention")
    yield database
    database.close()


def seed_rows(db: Database, clock: FakeClock, ages_days: list[float]) -> None:
    write_cycle(db, [Sample(CardKey(f"n{i}", 0), None, clock() - age * DAY, a100(1))
                     for i, age in enumerate(ages_days)])


def _metrics() -> SelfMetrics:
    return SelfMetrics(CollectorRegistry())


async def test_cleanup_runs_every_n_real_writes_and_deletes_only_expired(db: Database) -> None:
    clock, metrics = FakeClock(), _metrics()
    seed_rows(db, clock, [200, 181, 179, 1])
    retention = Retention(db, days=180, clock=clock, metrics=metrics, every_rows=10)
    retention.note_written(9)
    assert retention.runs == 0 and count_samples(db) == 4
    retention.note_written(1)
    await retention.wait()
    assert retention.runs == 1 and count_samples(db) == 2
    assert metrics.cleanup_runs.labels("ok")._value.get() == 1
    assert metrics.cleanup_deleted._value.get() == 2


async def test_nothing_written_means_no_cleanup(db: Database) -> None:
    retention = Retention(db, days=1, clock=FakeClock(), every_rows=1)
    for _ in range(10):
        retention.note_written(0)
    await retention.wait()
    assert retention.runs == 0


@pytest.mark.parametrize("typo", ["0", "-30", "abc", "1.5", ""])
async def test_a_typo_in_the_env_never_deletes_data(db: Database, typo: str) -> None:
    clock = FakeClock()
    seed_rows(db, clock, [170, 100, 2])
    days = retention_days_from_env({"GPU_HEALTH_RETENTION_DAYS": typo})
    retention = Retention(db, days=days, clock=clock, every_rows=1)
    retention.note_written(1)
    await retention.wait()
    assert retention.runs == 1 and count_samples(db) == 3


async def test_timeout_is_counted_and_never_raises(db: Database) -> None:
    metrics = _metrics()
    retention = Retention(db, days=1, clock=FakeClock(), metrics=metrics, timeout=0)
    await retention.run_once()
    assert metrics.cleanup_runs.labels("timeout")._value.get() == 1


async def test_ingest_triggers_cleanup_in_its_own_task_off_the_scrape_path(db: Database) -> None:
    clock = FakeClock()
    seed_rows(db, clock, [400])
    retention = Retention(db, days=180, clock=clock, every_rows=8)
    ingestor = Ingestor(db, DedupCache(), keepalive=timedelta(minutes=5),
                        on_written=retention.note_written)
    target = Target("127.0.0.1:1", "node")
    cards = tuple(CardReading(i, None, a100(i)) for i in range(8))
    result = ScrapeResult(target, clock(), 0.01, CardExtraction(cards))
    report = await ingestor.ingest([result])
    assert report.rows_written == 8
    assert retention.runs == 0  # scheduled, not run inside the cycle
    await retention.wait()
    assert retention.runs == 1 and count_samples(db) == 8


async def test_with_several_evaluators_only_the_leader_cleans_up(db: Database) -> None:
    clock = FakeClock()
    seed_rows(db, clock, [200, 1])
    leading = {"now": False}
    calls: list[bool] = []

    async def lead(fn: Callable[[], Awaitable[Any]]) -> Any:  # Cluster.leading's contract
        calls.append(leading["now"])
        return await fn() if leading["now"] else None

    retention = Retention(db, days=180, clock=clock, every_rows=1, leading=lead)
    retention.note_written(1)
    await retention.wait()
    assert retention.runs == 0 and count_samples(db) == 2  # a follower: nothing deleted
    leading["now"] = True
    retention.note_written(1)
    await retention.wait()
    assert retention.runs == 1 and count_samples(db) == 1 and calls == [False, True]
