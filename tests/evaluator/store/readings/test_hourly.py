"""Hourly correctable values for the capped growth gate, on both engines: read as every boundary
value is (last non-NULL, same UUID, at most ``boundary_max_age`` old), so the hours that are
window boundaries agree with the features statement's values; unknown is None, never 0."""

from __future__ import annotations

from dataclasses import replace

from gpu_health.evaluator.store.predictions.features import card_features
from gpu_health.evaluator.store.readings.hourly import hourly_values, wants_hourly, with_hourly
from tests.conftest import NewDb
from tests.evaluator.rules_support import PARAMS, at, const, load, quadratic, series

P = replace(PARAMS, cap_busiest_hours=3, min_increase=8)


def test_window_boundaries_agree_with_the_features_statement(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=12, every_minutes=20,
                    corrected=quadratic(30, onset=6)),
         series("n1", 1, "GPU-b", start=0, end=12, every_minutes=20, corrected=const(7)))
    features = card_features(db, [at(12)], "real", P)
    assert [f.gpu_index for f in features] == [0, 1]
    got = with_hourly(db, features, P)
    ramp, flat = got
    assert flat.hourly is None  # its last window cannot pass the magnitude gate: not read
    assert ramp.hourly is not None and len(ramp.hourly) == 3 * 24 + 1
    assert tuple(ramp.hourly[i * 24] for i in range(4)) == ramp.corrected
    c = quadratic(30, onset=6)
    assert ramp.hourly[5] == c(0 + (12 * 72 - 15) * 20 / 1440)  # the sample at t0 - 5 h
    db.close()


def test_gaps_and_another_uuid_are_unknown(new_db: NewDb) -> None:
    db = new_db()
    # collection stops for 3 hours, 10 h before t0; the card was another one before day 11
    load(db, series("n1", 0, "GPU-old", start=9, end=11 - 1 / 1440, every_minutes=30,
                    corrected=const(500)),
         series("n1", 0, "GPU-new", start=11, end=12 - 13 / 24, every_minutes=30,
                corrected=const(1)),
         series("n1", 0, "GPU-new", start=12 - 10 / 24, end=12, every_minutes=30,
                corrected=const(50)))
    values, = hourly_values(db, "real", [("n1", 0, "GPU-new", at(12))], 36, P.boundary_max_age)
    assert values[0] == 50 and values[10] == 50
    assert values[11] is None  # its last sample, at t0 - 13 h, is 120 minutes old
    assert values[12] == 1 and values[24] == 1  # 60 minutes old: still a value
    assert all(v is None for v in values[25:])  # GPU-old's rows are another card's
    assert hourly_values(db, "simulated", [("n1", 0, "GPU-new", at(12))], 2,
                         P.boundary_max_age) == [(None, None, None)]
    db.close()


def test_only_capping_rules_with_a_large_last_window_read_them() -> None:
    assert wants_hourly((40, 30), P) and not wants_hourly((40, 33), P)
    assert not wants_hourly((40, None), P)
    assert not wants_hourly((400, 0), PARAMS)  # v1 does not cap
