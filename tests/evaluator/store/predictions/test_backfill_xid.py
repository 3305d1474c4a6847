"""Memory XIDs as fault events at backfill, per the prediction's OWN rule version (real DuckDB).

Card n1/0 (GPU-a) has a flat uncorrectable count (0) throughout, so an ECC fault never happens
unless a test adds one; every prediction has t0 = day 10 and a 7-day window (day 10, day 17].
The same data is judged by a v1-ecc-growth prediction (ECC-only) and a v2-ecc-xid one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from gpu_health.evaluator.model import XidKey, XidSample
from gpu_health.evaluator.rules.outcome import classify
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.predictions.backfill import observe_pending
from gpu_health.evaluator.store.predictions.records import resolve
from gpu_health.evaluator.store.predictions.rule_versions import register_ruleset
from gpu_health.evaluator.store.readings.cycles import write_cycle
from gpu_health.evaluator.worker import Worker
from tests.conftest import NewDb
from tests.evaluator.rules_support import (
    Curve,
    at,
    const,
    insert_prediction,
    load,
    quadratic,
    ruleset,
    ruleset_v2,
    series,
    step,
)

T0 = at(10)


@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    store = new_db()
    for rs in (ruleset(), ruleset_v2()):
        register_ruleset(store, rs, at(0))
    yield store
    store.close()


def card(db: Database, unc: Curve | None = None, uuid: str = "GPU-a") -> None:
    load(db, series("n1", 0, uuid, start=0, end=30, uncorrected=unc or const(0),
                    corrected=const(1)))
    insert_prediction(db, pid="v1", node="n1", gpu=0, uuid="GPU-a", t0=T0)
    insert_prediction(db, pid="v2", node="n1", gpu=0, uuid="GPU-a", t0=T0, version="v2-ecc-xid")


def xids(db: Database, xid: int, *points: tuple[float, int], uuid: str = "GPU-a",
         source: str = "real") -> None:
    """XID rows as ingest stores them: (day, count since the exporter started)."""
    write_cycle(db, [], xids=[XidSample(XidKey("n1", 0, source, xid), uuid, at(d), n)
                              for d, n in points])


def backfill(db: Database, now_days: float) -> dict[str, int]:
    now = at(now_days)
    return resolve(db, [o for obs in observe_pending(db, now) if (o := classify(obs))], now)


def outcome(db: Database, pid: str) -> tuple[str, str]:
    row = db.fetchone("SELECT status, outcome FROM gpu_health_predictions WHERE id = $id",
                      {"id": pid})
    return str(row[0]), str(row[1])


def test_memory_xid_is_a_hit_for_v2_and_not_for_v1(db: Database) -> None:
    card(db)
    xids(db, 48, (0, 0), (12, 1))
    assert backfill(db, 11.9) == {"hit": 0, "miss": 0, "voided": 0}
    assert backfill(db, 12) == {"hit": 1, "miss": 0, "voided": 0}  # as soon as it is seen
    status, text = outcome(db, "v2")
    assert status == "hit"
    assert text == "memory XID 48 count 0 -> 1 at 2026-01-13T00:00:00Z, inside the window"
    assert outcome(db, "v1")[0] == "pending"
    assert backfill(db, 17) == {"hit": 0, "miss": 1, "voided": 0}
    assert outcome(db, "v1")[0] == "miss"  # v1's frozen, ECC-only outcome


@pytest.mark.parametrize("xid", [13, 31, 43, 79, 92])
def test_non_memory_xids_never_count(db: Database, xid: int) -> None:
    card(db)
    xids(db, xid, (0, 0), (11, 1), (12, 5))
    assert backfill(db, 17) == {"hit": 0, "miss": 2, "voided": 0}


@pytest.mark.parametrize("xid", [48, 63, 64, 94, 95])
def test_each_memory_xid_counts(db: Database, xid: int) -> None:
    card(db)
    xids(db, xid, (1, 2), (15, 3))
    assert backfill(db, 17) == {"hit": 1, "miss": 1, "voided": 0}


@pytest.mark.parametrize(
    ("points", "hit"),
    [
        ([(0, 0), (10, 1)], False),  # at t0: the window is left-open
        ([(0, 0), (17, 1)], True),  # at window_end: right-closed
        ([(0, 0), (17.01, 1)], False),  # after the window
        ([(0, 0), (9, 1)], False),  # before t0
        ([(12, 3)], False),  # a series' first row is never an event (when were those lines?)
        ([(0, 3), (12, 0)], False),  # exporter restart alone: never an event
        ([(0, 3), (12, 1)], True),  # restart, then one new line: an increase from 0
        ([(0, 2), (11, 0), (12, 0)], False),  # restart, nothing since
        ([(0, 2), (11, 0), (12, 2)], True),  # restart, then two new lines
    ],
)
def test_increase_rule_and_window_edges(db: Database, points: list[tuple[float, int]],
                                        hit: bool) -> None:
    card(db)
    xids(db, 94, *points)
    expected = {"hit": 1, "miss": 1, "voided": 0} if hit else {"hit": 0, "miss": 2, "voided": 0}
    assert backfill(db, 17) == expected


def test_restart_explanation_says_from_zero(db: Database) -> None:
    card(db)
    xids(db, 95, (0, 3), (12, 1))
    backfill(db, 17)
    assert "memory XID 95 count 0 -> 1 at 2026-01-13" in outcome(db, "v2")[1]


def test_xid_of_another_card_or_source_is_not_this_cards_fault(db: Database) -> None:
    card(db)
    xids(db, 48, (0, 0), (12, 1), uuid="GPU-other")  # a different UUID in the slot
    xids(db, 48, (0, 0), (12, 1), source="simulated")
    write_cycle(db, [], xids=[XidSample(XidKey("n1", 1, "real", 48), "GPU-a", at(d), n)
                              for d, n in ((0, 0), (12, 1))])  # another index
    # the GPU-other rows do not void either: only samples show a swap
    assert backfill(db, 17) == {"hit": 0, "miss": 2, "voided": 0}


def test_earliest_event_explains_the_hit(db: Database) -> None:
    card(db, step(13, 0, 2))  # an ECC fault on day 13 too
    xids(db, 48, (0, 0), (14, 1))
    xids(db, 63, (0, 0), (12.5, 1))
    xids(db, 94, (0, 0), (12.5, 1))  # same instant as 63: the lower code is reported
    backfill(db, 17)
    assert outcome(db, "v2")[1].startswith("memory XID 63 count 0 -> 1 at 2026-01-13T12:00:00Z")
    assert outcome(db, "v1")[1].startswith("uncorrectable ECC 0 -> 2 at 2026-01-14")


def test_version_definitions_are_frozen_in_the_store(db: Database) -> None:
    only_48 = ruleset(fault_xids=[48])  # v1 thresholds + XID 48: a distinct effective version
    register_ruleset(db, only_48, at(0))
    card(db)
    for pid, version in (("o48", only_48.version), ("unrecorded", "v9-unknown")):
        insert_prediction(db, pid=pid, node="n1", gpu=0, uuid="GPU-a", t0=T0, version=version)
    xids(db, 94, (0, 0), (12, 1))
    assert backfill(db, 12) == {"hit": 1, "miss": 0, "voided": 0}  # v2 only
    xids(db, 48, (0, 0), (13, 1))
    assert backfill(db, 13) == {"hit": 1, "miss": 0, "voided": 0}  # o48
    assert backfill(db, 17) == {"hit": 0, "miss": 2, "voided": 0}  # v1 and the unrecorded one


def test_xid_rows_never_make_an_unobservable_window_a_miss(db: Database) -> None:
    load(db, series("n1", 0, "GPU-a", start=0, end=30, corrected=const(1)))  # ECC unknown
    insert_prediction(db, pid="v2", node="n1", gpu=0, uuid="GPU-a", t0=T0, version="v2-ecc-xid",
                      unc0=None)
    xids(db, 48, (0, 0))
    assert backfill(db, 17) == {"hit": 0, "miss": 0, "voided": 1}


def test_statement_count_is_unchanged_with_xids(db: Database) -> None:
    card(db)
    xids(db, 48, (0, 0), (12, 1))
    before = db.statements
    assert backfill(db, 18) == {"hit": 1, "miss": 1, "voided": 0}
    # the pending-version lookup, one observation query, one CAS UPDATE per outcome kind
    assert db.statements - before == (4 if db.engine == "duckdb" else 6)  # + watermark reads


def test_workers_of_both_versions_on_the_same_card(new_db: NewDb) -> None:
    """End to end: v1 and v2 workers predict the same degrading card; a memory XID (no ECC
    increase) makes the v2 prediction a hit and leaves the v1 one a miss."""
    db = new_db("workers")
    load(db, series("n1", 0, "GPU-a", start=-8, end=30, corrected=quadratic(2, onset=0, base=10),
                    uncorrected=const(0)))
    xids(db, 48, (-8, 0), (14, 1))
    tick = at(12) + timedelta(minutes=10)
    v1, v2 = Worker(db, ruleset()), Worker(db, ruleset_v2())
    made = [p.rule_version for w in (v1, v2) for p in w.tick(tick).predictions]
    assert made == ["v1-ecc-growth", "v2-ecc-xid"]
    assert v2.tick(at(14) + timedelta(minutes=5)).resolved == {"hit": 1, "miss": 0, "voided": 0}
    assert v1.tick(at(19) + timedelta(minutes=5)).resolved == {"hit": 0, "miss": 1, "voided": 0}
    status = dict(db.fetchall("SELECT rule_version, status FROM gpu_health_predictions "
                              "WHERE t0 < $tick", {"tick": tick.replace(tzinfo=None)}))
    assert status == {"v1-ecc-growth": "miss", "v2-ecc-xid": "hit"}
    db.close()
