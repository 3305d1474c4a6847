"""XID counter samples: change-only writes (first, change, reset, UUID), the cache, cards without
counters, retention that keeps each series' base row, and the simulated purge (real DuckDB)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from gpu_health.clock import from_naive_utc
from gpu_health.errors import StoreError
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cards import CardExtraction, CardReading
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache, XidDedupCache
from gpu_health.evaluator.ingest.scrape import ScrapeResult
from gpu_health.evaluator.ingest.write_rule import XidReason, decide_xid
from gpu_health.evaluator.model import CardKey, Counters, Sample, XidKey, XidSample
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.cycles import write_cycle
from gpu_health.evaluator.store.readings.maintenance import delete_samples_before, purge_simulated
from gpu_health.evaluator.store.readings.xid_samples import latest_xid_rows
from tests.conftest import NewDb
from tests.evaluator.ingest_support import T0, FakeClock, a100
from tests.evaluator.store_support import count_samples, count_xid_samples


@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    database = new_db("xid")
    yield database
    database.close()


def key(xid: int = 48, node: str = "n1", gpu: int = 0, source: str = "real") -> XidKey:
    return XidKey(node, gpu, source, xid)


def row(count: int, minutes: float = 0, uuid: str | None = "GPU-a", **kw: object) -> XidSample:
    return XidSample(key(**kw), uuid, T0 + timedelta(minutes=minutes), count)  # type: ignore[arg-type]


def test_write_rule() -> None:
    assert decide_xid(row(0), None) is XidReason.FIRST
    assert decide_xid(row(0, 1), row(0)) is XidReason.UNCHANGED
    assert decide_xid(row(0, 60 * 24 * 30), row(0)) is XidReason.UNCHANGED  # no keep-alive
    assert decide_xid(row(1, 1), row(0)) is XidReason.CHANGED
    assert decide_xid(row(0, 1), row(3)) is XidReason.CHANGED  # exporter restart: written
    assert decide_xid(row(0, 1, uuid="GPU-b"), row(0)) is XidReason.UUID_CHANGED
    assert decide_xid(row(0, 1, uuid=None), row(0)) is XidReason.UUID_CHANGED


class Node:
    """One exporter target whose cards the test sets, ingested through a real Ingestor."""

    def __init__(self, db: Database, cache: XidDedupCache | None = None) -> None:
        self.clock = FakeClock()
        self.ingestor = Ingestor(db, DedupCache(), keepalive=timedelta(minutes=5),
                                 xid_cache=cache)
        self.target = Target("127.0.0.1:1", "n1")

    async def scrape(self, *cards: CardReading, minutes: float = 1) -> dict[str, int]:
        self.clock.advance(minutes=minutes)
        result = ScrapeResult(self.target, self.clock(), 0.01, CardExtraction(cards))
        report = await self.ingestor.ingest([result])
        return {k: v for k, v in report.decisions.items() if k.startswith("xid_")}


def card(xids: dict[int, int], uuid: str | None = "GPU-a", gpu: int = 0,
         counters: Counters | None = None) -> CardReading:
    return CardReading(gpu, uuid, a100(1) if counters is None else counters,
                       tuple(sorted(xids.items())))


def history(db: Database, xid: int = 48) -> list[tuple[str | None, int]]:
    rows = db.fetchall("SELECT gpu_uuid, count FROM gpu_health_xid_samples WHERE xid = $xid "
                       "ORDER BY sampled_at", {"xid": xid})
    return [(r[0], int(r[1])) for r in rows]


async def test_change_only_with_resets_and_swaps(db: Database) -> None:
    node = Node(db)
    assert await node.scrape(card({48: 0, 13: 1})) == {"xid_first": 2}
    assert await node.scrape(card({48: 0, 13: 1})) == {"xid_unchanged": 2}
    assert await node.scrape(card({48: 2, 13: 1})) == {"xid_changed": 1, "xid_unchanged": 1}
    assert await node.scrape(card({48: 0, 13: 0})) == {"xid_changed": 2}  # exporter restart
    assert await node.scrape(card({48: 0, 13: 0}, uuid="GPU-b")) == {"xid_uuid_changed": 2}
    assert history(db) == [("GPU-a", 0), ("GPU-a", 2), ("GPU-a", 0), ("GPU-b", 0)]
    assert history(db, 13) == [("GPU-a", 1), ("GPU-a", 0), ("GPU-b", 0)]


async def test_absent_series_write_nothing_and_unknown_is_not_zero(db: Database) -> None:
    node = Node(db)
    await node.scrape(card({48: 1}))
    # kernel log unreadable: the exporter drops the series; nothing is written, the stored 1
    # stays the base (an absent series is unknown, never 0)
    assert await node.scrape(card({})) == {}
    assert await node.scrape(card({48: 1})) == {"xid_unchanged": 1}
    assert history(db) == [("GPU-a", 1)]


async def test_cards_without_any_counter_still_get_their_xid_rows(db: Database) -> None:
    node = Node(db)
    await node.scrape(card({48: 0}, gpu=3, counters=Counters()))
    assert count_samples(db) == 0  # the all-unknown rule for samples is unchanged
    assert history(db) == [("GPU-a", 0)]


async def test_small_cache_costs_one_select_per_cycle(db: Database) -> None:
    node = Node(db, XidDedupCache(max_entries=2))
    cards = [card({48: 0, 63: 0, 64: 0}, uuid=f"GPU-{g}", gpu=g) for g in range(2)]
    await node.scrape(*cards)
    before = db.statements
    report_decisions = await node.scrape(*cards)
    assert report_decisions == {"xid_unchanged": 6}
    assert db.statements - before == 1  # the one SELECT for all six missed series


def test_latest_rows_are_found_whatever_their_age(db: Database) -> None:
    write_cycle(db, [], xids=[row(0), row(2, 60 * 24 * 200), row(5, xid=94),
                              row(7, gpu=1), row(1, source="simulated")])
    latest = latest_xid_rows(db, [key(), key(94), key(gpu=1), key(63), key(source="simulated")])
    assert {k: v.count for k, v in latest.items()} == {
        key(): 2, key(94): 5, key(gpu=1): 7, key(source="simulated"): 1}
    assert latest[key()].sampled_at == T0 + timedelta(days=200)


def test_retention_keeps_each_series_newest_row(db: Database) -> None:
    write_cycle(db, [], xids=[row(0), row(1, 10), row(2, 20),  # 48: two old rows go
                              row(0, xid=94),  # unchanged since: its only row stays
                              row(0, uuid="GPU-old", gpu=1), row(0, 5, uuid="GPU-new", gpu=1),
                              row(3, 60 * 24 * 10)])  # 48 again, newest, after the cutoff
    deleted = delete_samples_before(db, T0 + timedelta(days=1))
    assert (deleted.samples, deleted.xid_samples) == (0, 4)
    rows = db.fetchall("SELECT gpu_index, xid, gpu_uuid, count, sampled_at "
                       "FROM gpu_health_xid_samples ORDER BY 1, 2")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (0, 48, "GPU-a", 3), (0, 94, "GPU-a", 0), (1, 48, "GPU-new", 0)]
    assert from_naive_utc(rows[1][4]) == T0  # older than the cutoff, kept as the base


def test_purge_removes_simulated_xid_rows_only(db: Database) -> None:
    write_cycle(db, [], xids=[row(0), row(1, source="simulated"), row(2, 5, source="simulated")])
    purge_simulated(db)
    assert count_xid_samples(db, "simulated") == 0 and count_xid_samples(db, "real") == 1


def test_xid_rows_commit_with_the_samples_or_not_at_all(db: Database) -> None:
    bad = XidSample(key(), "GPU-a", T0, -1)  # the CHECK (count >= 0) refuses it
    sample = Sample(CardKey("n1", 0), "GPU-a", T0, a100(1))
    with pytest.raises(StoreError):
        write_cycle(db, [sample], xids=[bad])
    assert count_samples(db) == 0 and count_xid_samples(db) == 0
