"""The store as ingest uses it: NULLs, indexes, atomic cycles, kill -9, maintenance queries."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.clock import from_naive_utc
from gpu_health.errors import StoreError
from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.cycles import write_cycle
from gpu_health.evaluator.store.readings.maintenance import (
    NodeRecord,
    delete_samples_before,
    purge_simulated,
    simulated_nodes_present,
    upsert_nodes,
)
from gpu_health.evaluator.store.readings.samples import latest_rows
from tests.conftest import NewDb
from tests.evaluator.ingest_support import T0, a100
from tests.evaluator.store_support import count_samples
from tests.shared import REPO


@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    database = new_db("store")
    yield database
    database.close()


def sample(node: str, minutes: float = 0, source: str = "real", counters: Counters | None = None
           ) -> Sample:
    return Sample(CardKey(node, 0, source), None, T0 + timedelta(minutes=minutes),
                  a100(1) if counters is None else counters)


def test_unknown_counters_round_trip_as_none_never_zero(db: Database) -> None:
    partial = Counters(ecc_uncorrected_total=0, ecc_corrected_total=None, retired_pages=None,
                       remapped_rows_pending=None, remapped_rows_failure=1)
    write_cycle(db, [sample("n", counters=partial)])
    got = latest_rows(db, [CardKey("n", 0)])[CardKey("n", 0)]
    assert got.counters == partial
    assert got.counters.ecc_corrected_total is None and got.counters.ecc_uncorrected_total == 0


def test_samples_carry_no_art_index(tmp_path: Path) -> None:
    # the (node, index, time) ART index was ~90% of the file and served only point
    # lookups; readers use the daily rollups and zone maps instead (DuckDB only: PostgreSQL
    # reads by its B-tree indexes, test_postgres_store.py)
    db = DuckDBDatabase(tmp_path / "store.duckdb")
    rows = db.fetchall("SELECT index_name FROM duckdb_indexes() WHERE table_name IN ("
                       "'gpu_health_samples', 'gpu_health_sample_days', "
                       "'gpu_health_window_edges')")
    db.close()
    assert rows == []


def test_cycle_is_atomic_samples_and_nodes_together(db: Database) -> None:
    nodes = [NodeRecord("n", None, "t", T0), NodeRecord(None, "x", "t", T0)]  # type: ignore[arg-type]
    with pytest.raises(StoreError):
        write_cycle(db, [sample("n")], nodes)
    assert count_samples(db) == 0  # the sample insert was rolled back with the failed upsert


def test_upsert_nodes_inserts_then_updates(db: Database) -> None:
    upsert_nodes(db, [NodeRecord("n1", "acme", "http://a/metrics", T0)])
    upsert_nodes(db, [NodeRecord("n1", None, "http://b/metrics", T0 + timedelta(hours=1)),
                      NodeRecord("n2", "x", None, T0)])
    rows = db.fetchall("SELECT node_id, tenant, target, last_seen FROM gpu_health_nodes ORDER BY 1")
    assert [(r[0], r[1], r[2]) for r in rows] == [("n1", None, "http://b/metrics"),
                                                  ("n2", "x", None)]
    assert from_naive_utc(rows[0][3]) == T0 + timedelta(hours=1)


def test_retention_delete_and_simulated_purge_touch_only_their_rows(db: Database) -> None:
    write_cycle(db, [sample("old", 0), sample("new", 600), sample("sim", 0, "simulated"),
                     sample("sim", 600, "simulated")])
    assert delete_samples_before(db, T0 + timedelta(minutes=1)).samples == 2
    assert count_samples(db) == 2
    assert simulated_nodes_present(db, ["sim", "new", "zzz"]) == ["sim"]
    assert purge_simulated(db) == 1
    assert count_samples(db, "real") == 1 and count_samples(db, "simulated") == 0


WRITER = """
import sys
from datetime import UTC, datetime, timedelta
from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store.readings.cycles import write_cycle
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.maintenance import NodeRecord

db = DuckDBDatabase(sys.argv[1])
rows = int(sys.argv[2])
t0 = datetime(2026, 1, 1, tzinfo=UTC)
cycle = 0
while True:
    at = t0 + timedelta(minutes=cycle)
    batch = [Sample(CardKey(f"n{i // 8}", i % 8), f"GPU-{i}", at,
                    Counters(cycle, cycle, None, 0, 0)) for i in range(rows)]
    print(f"start {cycle}", flush=True)
    write_cycle(db, batch, [NodeRecord("writer", None, None, at)])
    print(f"done {cycle}", flush=True)
    cycle += 1
"""


def test_kill_9_mid_cycle_loses_at_most_that_cycle(tmp_path: Path) -> None:
    path = tmp_path / "killed.duckdb"
    rows = 20_000
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(rows)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.strip() == "start 3":  # cycles 0-2 committed, cycle 3 being written
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    db = DuckDBDatabase(path)  # opens cleanly (the WAL is replayed or discarded)
    try:
        per_cycle = db.fetchall("SELECT ecc_corrected_total, count(*) FROM gpu_health_samples "
                                "GROUP BY 1 ORDER BY 1")
        cycles = [c for c, _ in per_cycle]
        assert cycles == list(range(len(cycles))) and len(cycles) in (3, 4)
        assert all(n == rows for _, n in per_cycle), per_cycle  # whole cycles only
        seen = db.fetchone("SELECT last_seen FROM gpu_health_nodes WHERE node_id = 'writer'")[0]
        assert from_naive_utc(seen) == T0 + timedelta(minutes=cycles[-1])
        write_cycle(db, [sample("after", 9999)])  # and it is writable again
    finally:
        db.close()


def test_bounded_latest_lookup_includes_future_rows_and_skips_old_ones(db: Database) -> None:

    write_cycle(db, [sample("old", 0), sample("recent", 50), sample("recent", 55),
                     sample("future", 500)])
    keys = [CardKey(n, 0) for n in ("old", "recent", "future", "none")]
    found = latest_rows(db, keys, T0 + timedelta(minutes=45))
    assert set(found) == {CardKey("recent", 0), CardKey("future", 0)}
    assert found[CardKey("recent", 0)].sampled_at == T0 + timedelta(minutes=55)
