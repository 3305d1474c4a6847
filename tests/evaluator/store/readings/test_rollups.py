"""Rollups change no answer: every reader gives the same result from the raw rows alone (nothing
sealed) and from sealed days + leads + raw rows, on irregular, messy histories.

Two stores get the same rows and predictions; only the second is sealed. Then backfill
observations, statistics, fault evidence, features and the capability matrix are compared at
times inside days, at midnights and before the watermark (as the backtest asks), after a late
row lands in a sealed day, after retention cuts a day in two and after the simulated purge.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.predictions.backfill import observe_pending
from gpu_health.evaluator.store.predictions.features import card_features
from gpu_health.evaluator.store.readings import rollups
from gpu_health.evaluator.store.readings.maintenance import delete_samples_before, purge_simulated
from gpu_health.evaluator.store.readings.samples import insert_samples
from gpu_health.evaluator.store.statistics.api_queries import capabilities
from gpu_health.evaluator.store.statistics.sample_facts import base_params, first_evidence
from gpu_health.evaluator.store.statistics.stats_queries import raw_stats
from tests.conftest import NewDb
from tests.evaluator.rules_support import at, insert_prediction, params
from tests.evaluator.store_support import older_file

DAYS = 6
NOW = at(DAYS, ) + timedelta(hours=7, minutes=13)  # hourly sealing: sealed up to 07:00
HOUR = timedelta(hours=1)
EVERY = [None, timedelta(days=1), HOUR]  # the engine's own (PostgreSQL: hourly), daily, hourly
CARDS = [("n1", 0), ("n1", 1), ("n2", 0), ("n2", 3), ("n3", 0)]


def _history(rng: random.Random) -> list[Sample]:
    """Irregular rows (1 to 200 minutes apart, some seconds off the minute), counts that climb,
    drop (a reset), go unknown; a card swap; a simulated card beside the real ones."""
    rows: list[Sample] = []
    for n, (node, gpu) in enumerate([*CARDS, ("sim", 0)]):
        source = "simulated" if node == "sim" else "real"
        t, unc, corr, uuid = at(0), rng.choice([0, 0, 2]), 0, f"GPU-{n}"
        while t < NOW + timedelta(hours=3):  # a few rows after NOW: never read by it
            t += timedelta(minutes=rng.choice([1, 5, 5, 5, 30, 90, 200]),
                           seconds=rng.choice([0, 7]))
            roll = rng.random()  # faulty, quiet and silent cards: hits, misses and voids
            up = (0.03, 0.0, 0.004, 0.001, 0.0, 0.02)[n]
            unc = unc + 1 if roll < up else 0 if roll < up + 0.003 else unc
            corr += rng.choice([0, 0, 1, 5])
            if n == 2 and t > at(3.4):
                uuid = "GPU-swapped"
            known = n != 1 and rng.random() > 0.15
            corr_known = corr if rng.random() > 0.1 else None
            rows.append(Sample(CardKey(node, gpu, source), None if n == 4 else uuid, t,
                               Counters(unc if known else None, corr_known, None,
                                        0 if n % 2 else None, None)))
    return rows


def _predictions(db: Database, rng: random.Random) -> None:
    for i in range(14):
        node, gpu = CARDS[i % len(CARDS)]
        t0 = at(rng.uniform(0.2, DAYS - 0.5))
        insert_prediction(db, pid=f"p{i}", node=node, gpu=gpu, uuid=f"GPU-{i % len(CARDS)}",
                          t0=t0, window_days=rng.choice([1, 2, 3]), unc0=rng.choice([0, 1, None]),
                          version="v2-ecc-xid")


def _stores(new_db: NewDb, seed: int, every: timedelta | None = None, prefix: str = ""
            ) -> tuple[Database, Database, list[Sample]]:
    """A store read from raw rows only and one sealed up to NOW: at once, or every ``every``
    (an hour: the day of NOW is sealed up to 07:00 through several merges)."""
    rows = _history(random.Random(seed))
    pair = []
    for name in ("raw", "sealed"):
        db = new_db(f"{prefix}{name}")
        insert_samples(db, rows)
        _predictions(db, random.Random(seed))
        pair.append(db)
    sealed = pair[1]
    sealed.seal_every = every or sealed.seal_every
    if every == HOUR:  # irregular ticks: some seal several hours, some cross midnight
        rng, t = random.Random(seed), at(0)
        while (t := t + timedelta(minutes=rng.choice([20, 70, 130, 300]))) < NOW:
            rollups.seal(sealed, t)
    assert rollups.seal(sealed, NOW) == (DAYS if every != HOUR else 0)
    assert rollups.sealed_until(sealed) == rollups.step_floor(NOW - rollups.GRACE,
                                                              sealed.seal_every)
    return pair[0], sealed, rows


def _answers(db: Database, now: datetime) -> dict[str, Any]:
    since = at(0.3)
    out: dict[str, Any] = {
        "observe": observe_pending(db, now),
        "stats": [raw_stats(db, since=s, until=now, source=src, nodes=nodes, fault_xids=(48,))
                  # the last: a period starting after the watermark (hourly: raw rows before it)
                  for s in (since, at(0), at(2), now - timedelta(minutes=8))
                  for src in ("real", "simulated")
                  for nodes in (None, frozenset({"n2"}))],
        "features": card_features(db, [now, now - timedelta(hours=30)], "real",
                                  params(baseline_days=2, growth_window_hours=6)),
        "capabilities": capabilities(db, source="real", now=now),
    }
    cards: set[tuple[str, int, str | None]] = {
        (n, g, f"GPU-{i}") for i, (n, g) in enumerate(CARDS)} | {("n2", 0, "GPU-swapped")}
    out["evidence"] = first_evidence(db, base_params(since, now, "real", None), cards, (48,))
    return out


def _same(a: Database, b: Database, now: datetime) -> None:
    left, right = _answers(a, now), _answers(b, now)
    for key in left:
        assert left[key] == right[key], key


TIMES = [NOW, at(4) + timedelta(minutes=5), at(5), at(3.5), at(2) - timedelta(microseconds=1),
         at(DAYS) + timedelta(hours=3), at(DAYS) + timedelta(hours=7, microseconds=-1)]


@pytest.mark.parametrize(("seed", "every"), [(1, None), (2, None), (3, None),
                                             (1, timedelta(days=1)), (2, HOUR), (3, HOUR)])
def test_sealed_and_raw_readers_agree(new_db: NewDb, seed: int, every: timedelta | None
                                      ) -> None:
    raw, sealed, _ = _stores(new_db, seed, every)
    assert sealed.fetchone("SELECT count(*) FROM gpu_health_window_edges")[0] == 0
    for now in TIMES:
        _same(raw, sealed, now)
    edges = dict(sealed.fetchall("SELECT edge, count(*) FROM gpu_health_window_edges "
                                 "WHERE segment GROUP BY edge"))
    assert edges["head"] > 0 and edges["tail"] > 0
    assert raw.fetchone("SELECT count(*) FROM gpu_health_sample_days")[0] == 0


@pytest.mark.parametrize("every", EVERY)
def test_a_late_row_in_a_sealed_day_is_summarised_with_it(new_db: NewDb,
                                                          every: timedelta | None) -> None:
    raw, sealed, _ = _stores(new_db, 4, every)
    _answers(sealed, NOW)  # edges summarised before the late rows arrive
    late = [Sample(CardKey("n1", 0), "GPU-0", at(2.5) + timedelta(seconds=1), Counters(99, 1)),
            Sample(CardKey("n2", 3), "GPU-3", at(1.2), Counters(None, None, 4)),
            # in the partly sealed day (hourly): summarised up to the watermark only
            Sample(CardKey("n1", 1), "GPU-1", at(DAYS) + timedelta(hours=2), Counters(7, 3)),
            Sample(CardKey("n1", 1), "GPU-1", at(DAYS) + timedelta(hours=7, minutes=1),
                   Counters(8, 3))]
    for db in (raw, sealed):
        insert_samples(db, late)
    for now in TIMES:
        _same(raw, sealed, now)


@pytest.mark.parametrize("every", EVERY)
def test_retention_and_purge_keep_the_rollups_exact(new_db: NewDb, every: timedelta | None
                                                    ) -> None:
    raw, sealed, _ = _stores(new_db, 5, every)
    _answers(sealed, NOW)
    cutoff = at(1.6)  # inside a sealed day: that day is summarised again
    for db in (raw, sealed):
        delete_samples_before(db, cutoff)
    for now in TIMES[:3]:
        _same(raw, sealed, now)
    for db in (raw, sealed):
        purge_simulated(db)
    _same(raw, sealed, NOW)
    assert sealed.fetchone("SELECT count(*) FROM gpu_health_sample_days "
                           "WHERE source = 'simulated' OR day < $day",
                           {"day": at(1).replace(tzinfo=None)})[0] == 0


@pytest.mark.parametrize("every", [timedelta(days=1), HOUR])
def test_sealing_is_incremental_and_silent_when_nothing_is_due(new_db: NewDb,
                                                               every: timedelta) -> None:
    db = new_db("s")
    db.seal_every = every
    assert rollups.seal(db, NOW) == 0  # empty store: the watermark only
    assert rollups.sealed_until(db) == rollups.step_floor(NOW - rollups.GRACE, every)
    insert_samples(db, [Sample(CardKey("n", 0), "GPU-a", NOW, Counters(0, 0))])
    before = db.statements
    assert rollups.seal(db, NOW + timedelta(minutes=40)) == 0
    # nothing due, no statement (PostgreSQL: the one reading the watermark another evaluator
    # may have moved)
    assert db.statements - before == (0 if db.engine == "duckdb" else 1)
    if every == HOUR:  # the next hour: the row merged into its day's segment
        assert rollups.seal(db, NOW + timedelta(hours=1)) == 0
        assert db.fetchone("SELECT count(*), sum(n_rows) FROM gpu_health_sample_days") == (1, 1)
    assert rollups.seal(db, NOW + timedelta(days=1)) == 1
    assert db.fetchone("SELECT count(*), sum(n_rows) FROM gpu_health_sample_days") == (1, 1)


@pytest.mark.parametrize("seed", [8, 9])
def test_a_day_sealed_hour_by_hour_equals_the_day_sealed_at_once(new_db: NewDb,
                                                                  seed: int) -> None:
    """Merging each hour into the day's segment gives exactly the rows of summarising the
    whole day from the raw rows (every field, the hourly correctable counts included)."""
    _, daily, _ = _stores(new_db, seed, timedelta(days=1), "d")
    _, hourly, _ = _stores(new_db, seed, HOUR, "h")
    query = ("SELECT * FROM gpu_health_sample_days WHERE day < $day "
             "ORDER BY source, node_id, gpu_index, day, gpu_uuid")
    whole = {"day": at(DAYS).replace(tzinfo=None)}
    assert hourly.fetchall(query, whole) == daily.fetchall(query, whole)
    # the partly sealed day holds the rows before the watermark only
    assert hourly.fetchone("SELECT max(last_at) < $at FROM gpu_health_sample_days",
                           {"at": (at(DAYS) + timedelta(hours=7)).replace(tzinfo=None)})[0]


def test_the_migration_converts_a_file_written_before_it(tmp_path: Path) -> None:
    """A file as the previous release left it (migrations 1-4, both ART indexes): opening it
    drops the indexes; the first seal summarises its history; answers are unchanged."""
    rows = _history(random.Random(6))
    path = tmp_path / "old.duckdb"
    with older_file(path, 4):
        pass
    db = DuckDBDatabase(path)  # migration 5 runs here
    insert_samples(db, rows)
    _predictions(db, random.Random(6))
    reference = _answers(db, NOW)
    assert db.fetchall("SELECT index_name FROM duckdb_indexes() "
                       "WHERE table_name = 'gpu_health_samples'") == []
    assert rollups.seal(db, NOW) == DAYS
    assert _answers(db, NOW) == reference
    db.close()


def test_sealing_in_parts_gives_the_same_rollups(new_db: NewDb,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet whose day exceeds CHUNK_ROWS is sealed one day per transaction, split by node;
    a small one many days per statement: the same rows either way."""
    raw, sealed, _ = _stores(new_db, 7)  # sealed many days per statement
    monkeypatch.setattr(rollups, "CHUNK_ROWS", 40)
    assert rollups.seal(raw, NOW) == DAYS  # one day at a time, several statements per day
    assert raw.statements > sealed.statements
    query = ("SELECT * FROM gpu_health_sample_days "
             "ORDER BY source, node_id, gpu_index, day, gpu_uuid")
    assert raw.fetchall(query) == sealed.fetchall(query)


def test_a_rolled_back_seal_leaves_no_watermark_behind(new_db: NewDb) -> None:
    db = new_db("r")
    insert_samples(db, [Sample(CardKey("n", 0), "GPU-a", at(1), Counters(0, 0))])
    with pytest.raises(RuntimeError), db.transaction():
        assert rollups.seal(db, NOW) == DAYS - 1  # joins the outer transaction
        raise RuntimeError("undo")
    assert rollups.sealed_until(db) is None  # the process's note went with the rollback
    assert db.fetchone("SELECT count(*) FROM gpu_health_sample_days")[0] == 0
    assert rollups.seal(db, NOW) == DAYS - 1


def test_every_engine_seals_hourly(new_db: NewDb) -> None:
    """Before: no reader scans more than the open hour of raw rows (plus the grace), on
    DuckDB as on PostgreSQL."""
    db = new_db("h")
    assert db.seal_every == HOUR
    insert_samples(db, [Sample(CardKey("n", 0), "GPU-a", NOW - timedelta(hours=2),
                               Counters(0, 0))])
    rollups.seal(db, NOW)
    sealed = rollups.sealed_until(db)
    assert sealed is not None and NOW - sealed <= HOUR + rollups.GRACE
