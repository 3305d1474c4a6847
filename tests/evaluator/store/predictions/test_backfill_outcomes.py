"""Backfill semantics over a real DuckDB: hit / miss / voided, window edges, CAS.

Every prediction here has t0 = day 10 and a 7-day window (day 10, day 17].
"""

from __future__ import annotations

from datetime import timedelta

from gpu_health.evaluator.rules.outcome import classify
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.predictions.backfill import observe_pending
from gpu_health.evaluator.store.predictions.records import resolve
from tests.conftest import NewDb
from tests.evaluator.rules_support import (
    Curve,
    at,
    const,
    insert_prediction,
    load,
    series,
    step,
)

T0 = at(10)


def backfill(db: Database, now_days: float) -> dict[str, int]:
    now = at(now_days)
    outcomes = [o for obs in observe_pending(db, now) if (o := classify(obs))]
    return resolve(db, outcomes, now)


def status(db: Database, pid: str = "p") -> tuple[str, str | None]:
    row = db.fetchone("SELECT status, outcome FROM gpu_health_predictions WHERE id = $id",
                      {"id": pid})
    return str(row[0]), row[1]


def card(db: Database, unc: Curve | None = None, *, end: float = 30, uuid: str = "GPU-a",
         unc0: int | None = 0) -> None:
    load(db, series("n1", 0, uuid, start=0, end=end, uncorrected=unc or const(0),
                    corrected=const(1)))
    insert_prediction(db, pid="p", node="n1", gpu=0, uuid="GPU-a", t0=T0, unc0=unc0)


def test_hit_is_decided_as_soon_as_the_fault_is_seen(new_db: NewDb) -> None:
    db = new_db()
    card(db, step(12, 0, 2))
    assert backfill(db, 11.9) == {"hit": 0, "miss": 0, "voided": 0}
    assert status(db)[0] == "pending"
    assert backfill(db, 12) == {"hit": 1, "miss": 0, "voided": 0}
    state, outcome = status(db)
    assert state == "hit" and outcome is not None
    assert "0 -> 2" in outcome and "2026-01-13T00:00:00Z" in outcome
    assert backfill(db, 20) == {"hit": 0, "miss": 0, "voided": 0}  # final
    db.close()


def test_fault_after_now_is_not_seen(new_db: NewDb) -> None:
    db = new_db()
    card(db, step(12, 0, 2))
    assert backfill(db, 11) == {"hit": 0, "miss": 0, "voided": 0}
    db.close()


def test_miss_after_the_window_with_known_counts(new_db: NewDb) -> None:
    db = new_db()
    card(db, step(17.5, 0, 1))  # the fault comes after the window: still a miss
    assert backfill(db, 16.9)["miss"] == 0
    assert backfill(db, 17) == {"hit": 0, "miss": 1, "voided": 0}
    state, outcome = status(db)
    assert state == "miss" and outcome is not None and "0 at t0, max 0" in outcome
    db.close()


def test_window_is_left_open_right_closed(new_db: NewDb) -> None:
    db = new_db()
    # A rise exactly at window_end is inside; the t0 sample itself is not a new observation.
    card(db, step(17, 0, 1))
    assert backfill(db, 17) == {"hit": 1, "miss": 0, "voided": 0}
    db.close()
    db = new_db("b")
    card(db, step(10, 0, 3), unc0=3)  # already 3 at t0 (the strong signal's own evidence)
    assert backfill(db, 18) == {"hit": 0, "miss": 1, "voided": 0}
    db.close()


def test_no_sample_in_the_window_voids(new_db: NewDb) -> None:
    db = new_db()
    card(db, end=10)  # collection stopped at t0
    assert backfill(db, 16) == {"hit": 0, "miss": 0, "voided": 0}
    assert backfill(db, 17) == {"hit": 0, "miss": 0, "voided": 1}
    assert "no sample in the window" in str(status(db)[1])
    db.close()


def test_card_swap_voids(new_db: NewDb) -> None:
    db = new_db()
    card(db, end=13)
    load(db, series("n1", 0, "GPU-b", start=13.01, end=30, uncorrected=const(0)))
    assert backfill(db, 18) == {"hit": 0, "miss": 0, "voided": 1}
    outcome = str(status(db)[1])
    assert "card swapped: UUID GPU-b" in outcome and "predicted GPU-a" in outcome
    db.close()


def test_swap_after_a_hit_keeps_the_hit(new_db: NewDb) -> None:
    db = new_db()
    card(db, step(11, 0, 1), end=13)
    load(db, series("n1", 0, "GPU-b", start=13.01, end=30, uncorrected=const(0)))
    assert backfill(db, 18) == {"hit": 1, "miss": 0, "voided": 0}
    db.close()


def test_unknown_uncorrectable_count_voids_instead_of_missing(new_db: NewDb) -> None:
    db = new_db()
    card(db, const(None), unc0=None)
    assert backfill(db, 18) == {"hit": 0, "miss": 0, "voided": 1}
    assert "unknown in all" in str(status(db)[1])
    db.close()


def test_increase_after_a_reset_is_a_fault(new_db: NewDb) -> None:
    db = new_db()
    card(db, lambda t: 5 if t < 11 else (0 if t < 12 else 2), unc0=5)
    assert backfill(db, 13) == {"hit": 1, "miss": 0, "voided": 0}
    assert "0 -> 2" in str(status(db)[1])
    db.close()


def test_unknown_at_t0_is_never_the_start_of_an_increase(new_db: NewDb) -> None:
    db = new_db()
    card(db, lambda t: None if t <= 10.5 else 3, unc0=None)
    assert backfill(db, 18) == {"hit": 0, "miss": 1, "voided": 0}
    db.close()
    db = new_db("b")
    card(db, lambda t: None if t <= 10.5 else (3 if t < 12 else 4), unc0=None)
    assert backfill(db, 18) == {"hit": 1, "miss": 0, "voided": 0}
    db.close()


def test_sources_are_resolved_separately(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=30, uncorrected=step(12, 0, 1)),
         series("n1", 0, "GPU-a", start=0, end=30, uncorrected=const(0), source="simulated"))
    insert_prediction(db, pid="sim", node="n1", gpu=0, uuid="GPU-a", t0=T0, source="simulated")
    assert backfill(db, 18) == {"hit": 0, "miss": 1, "voided": 0}
    assert status(db, "sim")[0] == "miss"
    db.close()


def test_resolution_is_compare_and_set(new_db: NewDb) -> None:
    db = new_db()
    card(db)
    now = at(18)
    outcomes = [o for obs in observe_pending(db, now) if (o := classify(obs))]
    assert resolve(db, outcomes, now) == {"hit": 0, "miss": 1, "voided": 0}
    # A second instance holding the same (now stale) decision changes nothing.
    assert resolve(db, outcomes, now + timedelta(minutes=1)) == {"hit": 0, "miss": 0,
                                                                "voided": 0}
    row = db.fetchone("SELECT resolved_at FROM gpu_health_predictions WHERE id = 'p'")
    assert row[0] == now
    db.close()


def test_many_pending_predictions_in_one_pass(new_db: NewDb) -> None:
    db = new_db()
    for g in range(6):
        load(db, series("n1", g, f"GPU-{g}", start=0, end=30, every_minutes=60,
                        uncorrected=step(12 + g, 0, 1) if g % 2 == 0 else const(0)))
        insert_prediction(db, pid=f"p{g}", node="n1", gpu=g, uuid=f"GPU-{g}", t0=T0)
    before = db.statements
    assert backfill(db, 18) == {"hit": 3, "miss": 3, "voided": 0}
    # the oldest open window, one observation query, one CAS UPDATE per outcome kind
    # PostgreSQL reads the rollup watermark from its table each time (another evaluator may
    # have sealed): two statements more
    assert db.statements - before == (4 if db.engine == "duckdb" else 6)
    before = db.statements
    assert backfill(db, 19) == {"hit": 0, "miss": 0, "voided": 0}
    # nothing pending: one cheap lookup, no scan (PostgreSQL: and the watermark read)
    assert db.statements - before == (1 if db.engine == "duckdb" else 3)
    db.close()
