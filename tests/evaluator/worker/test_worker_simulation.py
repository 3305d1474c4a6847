"""End-to-end simulation: degrading cards -> predictions -> hits, voids and misses.

The whole timeline is stored up front, which is exactly what the explicit ``sampled_at <= now``
bound must cope with: at every tick the worker sees only the past. freezegun moves the clock
across window ends; the worker reads it through the default system clock.

Cards (30-minute samples, correctable count quadratic from day 0, predictions from day ~8.5):
  hit    uncorrectable error on day 14 -> hit before the window ends
  swap   card replaced on day 13 -> voided
  stall  collection stops at the tick's t0 -> voided
  miss   degrades, never fails -> miss
  skew   one row dated day 40 (agent clock skew) -> t0 stays in the past
  flat   never predicted
  sim    a simulated degrading card -> its own prediction, never in real stats
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from freezegun import freeze_time

from gpu_health.evaluator.stats.document import prediction_stats
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.worker import Worker
from tests.conftest import NewDb
from tests.evaluator.rules_support import (
    Curve,
    at,
    const,
    load,
    quadratic,
    ruleset,
    series,
    step,
)

DEGRADING = quadratic(2, onset=0, base=10)
TICK = at(12) + timedelta(minutes=10)


def build(db: Database) -> None:
    def card(gpu: int, uuid: str, end: float = 30, uncorrected: Curve | None = None,
             corrected: Curve = DEGRADING) -> None:
        load(db, series("n1", gpu, uuid, start=-8, end=end, corrected=corrected,
                        uncorrected=uncorrected or const(0)))

    card(0, "GPU-hit", uncorrected=step(14, 0, 1))
    card(1, "GPU-swap", end=13)
    load(db, series("n1", 1, "GPU-new", start=13.02, end=30, corrected=const(0),
                    uncorrected=const(0)))
    card(2, "GPU-stall", end=12)
    card(3, "GPU-miss")
    card(4, "GPU-skew")
    load(db, series("n1", 4, "GPU-skew", start=40, end=40, corrected=const(99999)))
    card(5, "GPU-flat", corrected=const(7))
    load(db, series("n1", 0, "GPU-hit", start=-8, end=30, corrected=DEGRADING,
                    uncorrected=const(0), source="simulated"))


def rows(db: Database) -> dict[tuple[str, int], tuple[str, str]]:
    return {
        (str(s), int(g)): (str(st), str(sig))
        for s, g, st, sig in db.fetchall(
            "SELECT source, gpu_index, status, signal FROM gpu_health_predictions")
    }


def test_simulated_fleet_end_to_end(new_db: NewDb) -> None:
    db = new_db()
    build(db)
    worker = Worker(db, ruleset())

    with freeze_time(TICK) as clock:
        report = worker.tick()
        assert report.evaluated == {"real": 6, "simulated": 1}
        created = {(p.source, p.gpu_index): p for p in report.predictions}
        assert set(created) == {("real", g) for g in range(5)} | {("simulated", 0)}
        for p in created.values():
            assert p.signal == "ecc_corrected_growth" and p.layer == "trend"
            assert p.t0 <= TICK and p.window_end == p.t0 + timedelta(days=7)
        assert created[("real", 4)].t0 == at(12)  # the day-40 row did not become t0
        assert created[("real", 2)].t0 == at(12)

        clock.move_to(TICK + timedelta(minutes=30))  # no second prediction while windows open
        assert worker.tick().predictions == ()

        clock.move_to(at(14) + timedelta(minutes=5))
        report = worker.tick()
        assert report.resolved == {"hit": 1, "miss": 0, "voided": 0}
        assert rows(db)[("real", 0)] == ("hit", "ecc_corrected_growth")

        clock.move_to(at(19) + timedelta(minutes=5))  # every window (t0 = day 12) has ended
        report = worker.tick()
        assert report.resolved == {"hit": 0, "miss": 3, "voided": 2}  # 2 real + 1 simulated
        final = rows(db)
        assert final[("real", 1)][0] == final[("real", 2)][0] == "voided"
        assert final[("real", 3)][0] == final[("real", 4)][0] == "miss"
        assert final[("simulated", 0)][0] == "miss"
        assert ("real", 5) not in final
        # Windows are over, so still-degrading cards may be predicted again (new t0, new id).
        assert {p.gpu_index for p in report.predictions if p.source == "real"} <= {0, 3, 4}

    stats = prediction_stats(db, now=at(19) + timedelta(minutes=5), since=at(-8))
    w7 = stats["windows"][0]
    assert w7["window_days"] == 7 and w7["matured"] == 3
    assert (w7["predictions"]["hit"], w7["predictions"]["voided"]) == (1, 2)
    assert w7["faulty_cards"] == 1 and w7["predicted_faulty_cards"] == 1
    assert w7["precision"] is None  # 3 matured predictions are not enough for a ratio
    sim = prediction_stats(db, now=at(19) + timedelta(minutes=5), since=at(-8),
                           source="simulated")
    assert sim["windows"][0]["predictions"]["miss"] == 1
    db.close()


def test_disabled_rule_set_backfills_but_does_not_predict(
    new_db: NewDb, caplog: pytest.LogCaptureFixture
) -> None:
    db = new_db()
    build(db)
    Worker(db, ruleset()).tick(TICK)
    off = Worker(db, ruleset(enabled="false"))
    assert off.ruleset.version == "v1-ecc-growth"
    report = off.tick(at(19) + timedelta(minutes=5))
    assert report.predicting is False and report.predictions == ()
    assert report.resolved == {"hit": 1, "miss": 3, "voided": 2}
    assert "disabled" in caplog.text
    assert off.tick(at(30)).predictions == ()
    db.close()
