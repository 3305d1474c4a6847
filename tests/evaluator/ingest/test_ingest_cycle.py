"""Whole ingest cycles against a real stand-in exporter and a real DuckDB file.

The statement counter of ``Database`` proves the reference's cost model: zero statements per
cycle in the steady state, one SELECT for all cache misses, one INSERT per cycle of changes.
With XID series: one more SELECT for all XID-series misses and one more INSERT in the same
transaction, and still zero statements in the steady state.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.clock import from_naive_utc
from gpu_health.errors import StoreError
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.scrape import Scraper
from gpu_health.evaluator.ingest.scrape_tick import IngestPipeline
from gpu_health.evaluator.model import CardKey, Counters
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.samples import latest_rows
from tests.evaluator.ingest_support import Card, FakeClock, StandIn, a100, render, stand_in

GPUS = 8


@dataclass
class Rig:
    server: StandIn
    db: Database
    clock: FakeClock
    scraper: Scraper
    targets: list[Target]

    def pipeline(self, cache: DedupCache | None = None) -> IngestPipeline:
        ingestor = Ingestor(self.db, DedupCache() if cache is None else cache,
                            keepalive=timedelta(minutes=5))
        return IngestPipeline(targets=lambda: self.targets, scraper=self.scraper,
                              ingestor=ingestor, clock=self.clock)

    def serve(self, name: str, corrected: list[int], uuid_prefix: str = "GPU",
              xids: dict[int, int] | None = None) -> None:
        self.server.bodies[name] = render(
            [Card(i, f"{uuid_prefix}-{name}-{i}", a100(c), xids) for i, c in enumerate(corrected)]
        )

    def rows(self, table: str = "gpu_health_samples") -> int:
        return int(self.db.fetchone(f"SELECT count(*) FROM {table}")[0])


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    db = DuckDBDatabase(tmp_path / "ingest.duckdb")
    clock = FakeClock()
    async with stand_in() as server, Scraper(timeout=5, max_concurrency=8,
                                             max_response_bytes=1 << 20, clock=clock) as scraper:
        r = Rig(server, db, clock, scraper, [])
        for name in ("n1", "n2"):
            r.serve(name, [10] * GPUS)
            r.targets.append(server.target(name, tenant="acme"))
        yield r
    db.close()


async def test_cold_cycle_writes_every_first_sample_in_one_statement(rig: Rig) -> None:
    pipeline = rig.pipeline()
    before = rig.db.statements
    report = await pipeline.run_cycle()
    assert report.rows_written == 2 * GPUS and report.decisions == {"first": 2 * GPUS}
    # one SELECT for the misses, then BEGIN + INSERT + node upsert + COMMIT
    assert report.selects == 1
    assert rig.db.statements - before == 5
    assert rig.rows() == 2 * GPUS


async def test_steady_state_costs_zero_statements(rig: Rig) -> None:
    pipeline = rig.pipeline()
    await pipeline.run_cycle()
    for _ in range(4):
        rig.clock.advance(seconds=60)
        before = rig.db.statements
        report = await pipeline.run_cycle()
        assert rig.db.statements == before, "steady state must not touch the DB"
        assert report.hits == 2 * GPUS and report.misses == 0 and report.rows_written == 0
        assert report.decisions == {"unchanged": 2 * GPUS}
    assert rig.server.requests["n1"] == 5  # it really scraped every cycle


async def test_one_change_costs_one_insert_and_no_select(rig: Rig) -> None:
    pipeline = rig.pipeline()
    await pipeline.run_cycle()
    rig.serve("n1", [10, 11, 10, 10, 10, 10, 10, 10])
    rig.clock.advance(seconds=60)
    before = rig.db.statements
    report = await pipeline.run_cycle()
    assert rig.db.statements - before == 1
    assert report.rows_written == 1 and report.decisions["changed"] == 1
    latest = latest_rows(rig.db, [CardKey("n1", 1)])[CardKey("n1", 1)]
    assert latest.counters.ecc_corrected_total == 11 and latest.sampled_at == rig.clock.now


async def test_keepalive_counts_from_the_stored_row(rig: Rig) -> None:
    pipeline = rig.pipeline()
    await pipeline.run_cycle()
    first = rig.clock.now
    for _ in range(4):
        rig.clock.advance(seconds=60)
        assert (await pipeline.run_cycle()).rows_written == 0
    rig.clock.advance(seconds=60)  # 5 min after the stored row, not after the last scrape
    report = await pipeline.run_cycle()
    assert report.decisions == {"keepalive": 2 * GPUS}
    keys = [CardKey("n1", i) for i in range(GPUS)]
    assert {r.sampled_at - first for r in latest_rows(rig.db, keys).values()} == {
        timedelta(minutes=5)
    }


async def test_cache_miss_costs_one_select_for_all_missed_cards(rig: Rig) -> None:
    await rig.pipeline().run_cycle()
    rig.clock.advance(seconds=60)
    fresh = rig.pipeline()  # a restarted evaluator: empty cache, same DB
    before = rig.db.statements
    report = await fresh.run_cycle()
    assert report.misses == 2 * GPUS and report.selects == 1 and report.rows_written == 0
    # the node records are new to this process too: one upsert, alone (no BEGIN/COMMIT)
    assert rig.db.statements - before == 2
    rig.clock.advance(seconds=60)
    before = rig.db.statements
    await fresh.run_cycle()
    assert rig.db.statements == before  # the SELECT filled the cache


async def test_cache_smaller_than_the_fleet_still_one_select_per_cycle(rig: Rig) -> None:
    pipeline = rig.pipeline(DedupCache(max_entries=3))
    await pipeline.run_cycle()
    for _ in range(3):
        rig.clock.advance(seconds=60)
        before = rig.db.statements
        report = await pipeline.run_cycle()
        assert report.selects == 1 and rig.db.statements - before == 1
        assert report.rows_written == 0 and report.hits + report.misses == 2 * GPUS


async def test_all_unknown_cards_never_reach_the_db(rig: Rig) -> None:
    pipeline = rig.pipeline()
    await pipeline.run_cycle()
    # new cards (never stored) whose counters are all unknown: not even a SELECT for them
    rig.server.bodies["n1"] = render([Card(i + 100, f"GPU-new-{i}", Counters())
                                      for i in range(GPUS)])
    rig.clock.advance(seconds=60)
    before = rig.db.statements
    report = await pipeline.run_cycle()
    assert rig.db.statements == before
    assert report.decisions["all_unknown"] == GPUS and report.misses == 0


async def test_uuid_change_in_a_slot_is_written(rig: Rig) -> None:
    pipeline = rig.pipeline()
    await pipeline.run_cycle()
    rig.serve("n2", [10] * GPUS, uuid_prefix="SWAPPED")
    rig.clock.advance(seconds=60)
    report = await pipeline.run_cycle()
    assert report.decisions == {"unchanged": GPUS, "uuid_changed": GPUS}


async def test_failed_write_keeps_the_cache_and_the_next_cycle_retries(rig: Rig) -> None:
    pipeline = rig.pipeline()
    await pipeline.run_cycle()
    rig.serve("n1", [20] * GPUS)
    rig.clock.advance(seconds=60)
    # A real store failure: the table is briefly gone.
    rig.db.execute("ALTER TABLE gpu_health_samples RENAME TO samples_away")
    with pytest.raises(StoreError):
        await pipeline.run_cycle()
    rig.db.execute("ALTER TABLE samples_away RENAME TO gpu_health_samples")
    assert rig.rows() == 2 * GPUS  # nothing half-written
    rig.clock.advance(seconds=60)
    report = await pipeline.run_cycle()
    assert report.decisions["changed"] == GPUS and report.rows_written == GPUS


async def test_nodes_table_written_on_change_only(rig: Rig) -> None:
    pipeline = rig.pipeline()
    await pipeline.run_cycle()
    rows = rig.db.fetchall("SELECT node_id, tenant, target, last_seen FROM gpu_health_nodes "
                           "ORDER BY 1")
    assert [(r[0], r[1]) for r in rows] == [("n1", "acme"), ("n2", "acme")]
    assert rows[0][2].endswith("/t/n1/metrics")
    assert from_naive_utc(rows[0][3]) == rig.clock.now
    rig.targets[0] = rig.server.target("n1", tenant="globex")
    rig.clock.advance(seconds=60)
    report = await pipeline.run_cycle()
    assert report.nodes_written == 1
    tenant = rig.db.fetchone("SELECT tenant FROM gpu_health_nodes WHERE node_id = 'n1'")[0]
    assert tenant == "globex"
    # last_seen is refreshed once per keepalive period, together with the keepalive rows
    for _ in range(3):
        rig.clock.advance(seconds=60)
        assert (await pipeline.run_cycle()).nodes_written == 0
    rig.clock.advance(seconds=60)
    assert (await pipeline.run_cycle()).nodes_written == 1  # n2, first seen 5 min ago
    rig.clock.advance(seconds=60)
    assert (await pipeline.run_cycle()).nodes_written == 1  # n1, rewritten 5 min ago


async def test_restart_lookup_reads_only_rows_young_enough_to_matter(rig: Rig) -> None:
    await rig.pipeline().run_cycle()
    rig.clock.advance(minutes=3)
    report = await rig.pipeline().run_cycle()  # restarted within the keepalive: found, skipped
    assert report.selects == 1 and report.decisions == {"unchanged": 2 * GPUS}
    rig.clock.advance(minutes=7)
    report = await rig.pipeline().run_cycle()  # rows are 10 min old: written either way
    assert report.decisions == {"first": 2 * GPUS} and report.rows_written == 2 * GPUS


XIDS = {48: 0, 63: 0, 64: 0, 94: 0, 95: 0, 13: 2}  # as the exporter exports them, plus one other


async def test_xid_series_keep_the_cost_model(rig: Rig) -> None:
    for name in ("n1", "n2"):
        rig.serve(name, [10] * GPUS, xids=XIDS)
    pipeline = rig.pipeline()
    before = rig.db.statements
    report = await pipeline.run_cycle()
    # two SELECTs (card misses, XID-series misses), then BEGIN + 2 INSERTs + upsert + COMMIT
    assert report.selects == 2 and rig.db.statements - before == 7
    assert report.rows_written == 2 * GPUS and report.xid_rows_written == 2 * GPUS * len(XIDS)
    assert report.decisions == {"first": 2 * GPUS, "xid_first": 2 * GPUS * len(XIDS)}
    assert rig.rows("gpu_health_xid_samples") == 2 * GPUS * len(XIDS)
    for _ in range(4):  # steady state: nothing, not even for the XID series
        rig.clock.advance(seconds=60)
        before = rig.db.statements
        report = await pipeline.run_cycle()
        assert rig.db.statements == before and report.xid_hits == 2 * GPUS * len(XIDS)
    rig.clock.advance(seconds=60)  # keepalive: sample rows and nodes, never XID rows
    report = await pipeline.run_cycle()
    assert report.decisions["keepalive"] == 2 * GPUS and report.xid_rows_written == 0
    rig.serve("n1", [10] * GPUS, xids={**XIDS, 48: 1})  # a memory XID on every n1 card
    rig.clock.advance(seconds=60)
    before = rig.db.statements
    report = await pipeline.run_cycle()
    assert rig.db.statements - before == 1  # one INSERT, alone: no BEGIN/COMMIT, no SELECT
    assert report.xid_rows_written == GPUS and report.decisions["xid_changed"] == GPUS
    assert report.rows_written == 0


async def test_restarted_evaluator_finds_old_xid_rows_in_one_select(rig: Rig) -> None:
    for name in ("n1", "n2"):
        rig.serve(name, [10] * GPUS, xids=XIDS)
    await rig.pipeline().run_cycle()
    rig.clock.advance(days=3)  # far older than any keepalive: the XID lookup is not bounded
    fresh = rig.pipeline()
    before = rig.db.statements
    report = await fresh.run_cycle()
    assert report.selects == 2 and report.xid_misses == 2 * GPUS * len(XIDS)
    assert report.decisions["xid_unchanged"] == 2 * GPUS * len(XIDS)
    assert report.xid_rows_written == 0 and report.decisions["first"] == 2 * GPUS
    assert rig.db.statements - before == 2 + 4  # SELECTs, then BEGIN, samples, nodes, COMMIT


async def test_listed_cards_count_all_unknown_cards_and_are_written_on_change(rig: Rig) -> None:
    pipeline = rig.pipeline()
    await pipeline.run_cycle()
    # n1 now lists its 8 cards plus 2 whose counters are all unknown (no sample row for them)
    rig.server.bodies["n1"] = render([Card(i, f"GPU-n1-{i}", a100(10)) for i in range(GPUS)]
                                     + [Card(GPUS + i, f"GPU-x-{i}", Counters()) for i in range(2)])
    rig.clock.advance(seconds=60)
    await pipeline.run_cycle()
    listed = rig.db.fetchall("SELECT node_id, listed_source, listed_cards FROM gpu_health_nodes "
                             "ORDER BY 1")
    assert listed == [("n1", "real", GPUS + 2), ("n2", "real", GPUS)]
    rig.clock.advance(seconds=60)
    before = rig.db.statements
    await pipeline.run_cycle()  # nothing changed: still zero statements
    assert rig.db.statements == before


async def test_many_targets_going_down_or_up_log_ten_lines_and_one_summary(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    """Before: 20,000 new targets on a closed port logged 20,000 lines from the event loop.
    Each way, ten transitions are named and the rest are counted in one line."""
    rig.targets = [rig.server.target(f"d{i}") for i in range(25)]  # no body: 404, down
    pipeline = rig.pipeline()
    with caplog.at_level(logging.INFO, logger="gpu_health.evaluator.ingest.scrape_tick"):
        await pipeline.run_cycle()
        down = [r.getMessage() for r in caplog.records]
        caplog.clear()
        await pipeline.run_cycle()  # still down: no line at all
        assert caplog.records == []
        for i in range(25):
            rig.serve(f"d{i}", [10])
        await pipeline.run_cycle()
        up = [r.getMessage() for r in caplog.records]
    assert len(down) == 11 and all(" is down: http_status" in m for m in down[:10])
    assert down[10] == "15 more targets went down this cycle (each is listed at /targets)"
    assert len(up) == 11 and up[10] == "15 more targets are up again this cycle"


async def test_a_clock_stepped_back_an_hour_shows_no_stall_after_one_cycle(rig: Rig) -> None:
    """The evaluator's clock stepping back an hour leaves every stored row "in the future":
    counted as of the new now, the cards' newest samples would be an hour old (a collection
    stall on every node, check WARNING, for an hour). The first cycle after the step writes a
    row stamped with the new now (``latest_in_future``), so the stall, if seen at all, lasts
    one scrape interval, not the hour."""
    from gpu_health.evaluator.store.statistics.api_queries import capabilities

    pipeline = rig.pipeline()
    for _ in range(12):  # an hour of scrapes, every 5 minutes, counters unchanged
        await pipeline.run_cycle()
        rig.clock.advance(minutes=5)
    rig.clock.advance(hours=-1)
    stall = timedelta(minutes=10)
    report = await pipeline.run_cycle()
    assert report.decisions == {"latest_in_future": 2 * GPUS}
    cards = capabilities(rig.db, source="real", now=rig.clock())
    assert len(cards) == 2 * GPUS
    assert all(rig.clock() - c.last_sample_at <= stall for c in cards)
    rig.clock.advance(minutes=1)
    assert (await pipeline.run_cycle()).rows_written == 0  # the new row is the cached base
