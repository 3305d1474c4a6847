"""Feature extraction in SQL (real DuckDB): boundary semantics, t0, capability, sources.

A boundary value is the last non-NULL value of a same-UUID sample at most 60 minutes before the
boundary; anything else is unknown. t0 is the last sample at or before ``at``.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gpu_health.evaluator.model import CardDetails, CardKey, Counters, Sample
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.predictions.features import card_features
from gpu_health.evaluator.store.readings.samples import insert_samples
from tests.conftest import NewDb, open_store
from tests.evaluator.rules_support import (
    PARAMS,
    START,
    at,
    const,
    load,
    params,
    quadratic,
    series,
    step,
)


def one(db: Database, when_days: float, source: str = "real") -> CardFeatures:
    rows = card_features(db, [at(when_days)], source, PARAMS)
    assert len(rows) == 1, rows
    return rows[0]


def test_boundaries_of_a_degrading_card(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=20, corrected=quadratic(2, onset=5),
                    uncorrected=const(0), pending=step(19.5, 0, 1), failure=const(0)))
    f = one(db, 20)
    assert f.t0 == at(20) and f.gpu_uuid == "GPU-a" and f.source == "real"
    c = quadratic(2, onset=5)
    assert f.corrected == tuple(c(20 - i) for i in range(4))
    assert f.corrected_baseline == c(13)
    assert f.baseline_samples == 7 * 48  # 30-minute samples in (t0 - 7d, t0]
    assert (f.uncorrected, f.remap_failure) == (0, 0)
    assert (f.remap_pending, f.remap_pending_before) == (1, 0)
    assert f.retired_pages is None and f.retired_pages_before is None  # unknown, not 0
    db.close()


def test_t0_ignores_future_dated_rows(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=10, corrected=const(5)),
         series("n1", 0, "GPU-a", start=40, end=40, corrected=const(9)))  # agent clock skew
    f = one(db, 10.01)
    assert f.t0 == at(10) and f.corrected[0] == 5
    db.close()


def test_stale_card_is_not_evaluated(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=10, corrected=const(5)))
    assert card_features(db, [at(10) + timedelta(minutes=60)], "real", PARAMS)
    assert card_features(db, [at(10) + timedelta(minutes=61)], "real", PARAMS) == []
    db.close()


def test_card_without_any_known_counter_is_not_evaluated(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=10))  # every counter unknown
    assert card_features(db, [at(10)], "real", PARAMS) == []
    db.close()


def test_old_boundary_value_is_unknown(new_db: NewDb) -> None:
    db = new_db()
    # Hourly samples but a gap of 3 hours around t0 - 24h: that boundary is unknown.
    rows = series("n1", 0, "GPU-a", start=0, end=10, every_minutes=60, corrected=const(1))
    gap = (at(9) - timedelta(hours=2), at(9) + timedelta(hours=1))
    load(db, [r for r in rows if not gap[0] <= r.sampled_at < gap[1]])
    f = one(db, 10)
    assert f.corrected == (1, None, 1, 1)
    db.close()


def test_null_at_boundary_falls_back_to_a_recent_known_value(new_db: NewDb) -> None:
    db = new_db()
    rows = series("n1", 0, "GPU-a", start=0, end=10, corrected=lambda t: int(t * 100))
    b = at(9)  # t0 - 24h
    patched = [
        Sample(r.key, r.gpu_uuid, r.sampled_at, Counters(ecc_uncorrected_total=0))
        if r.sampled_at == b else r for r in rows
    ]
    load(db, patched)
    f = one(db, 10)
    assert f.corrected[1] == int((9 - 30 / 1440) * 100)  # the sample 30 minutes earlier
    db.close()


def test_other_uuid_values_are_never_used(new_db: NewDb) -> None:
    db = new_db()
    # Card swapped 2 days ago: the new card's history is only 2 days long.
    load(db, series("n1", 0, "GPU-old", start=0, end=8, corrected=const(9000)),
         series("n1", 0, "GPU-new", start=8.01, end=10, corrected=const(3)))
    f = one(db, 10)
    assert f.gpu_uuid == "GPU-new"
    assert f.corrected == (3, 3, None, None) and f.corrected_baseline is None
    db.close()


def test_sources_never_mix(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=10, corrected=const(1)),
         series("n1", 0, "GPU-a", start=0, end=10, corrected=const(500), source="simulated"))
    assert one(db, 10).corrected == (1, 1, 1, 1)
    assert one(db, 10, "simulated").corrected == (500, 500, 500, 500)
    db.close()


def test_null_uuid_cards_are_a_series_of_their_own(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, None, start=0, end=10, uncorrected=const(0)))
    f = one(db, 10)
    assert f.gpu_uuid is None and f.uncorrected == 0 and f.corrected == (None,) * 4
    db.close()


def test_many_evaluation_times_match_single_calls_in_any_chunking(new_db: NewDb) -> None:
    db = new_db()
    load(db, *(series("n1", g, f"GPU-{g}", start=0, end=12, corrected=quadratic(g + 1, onset=2))
               for g in range(3)))
    times = [at(9 + i / 4) for i in range(8)]
    singles = [f for t in times for f in card_features(db, [t], "real", PARAMS)]
    assert card_features(db, times, "real", PARAMS, chunk=3) == singles
    assert card_features(db, times, "real", PARAMS, chunk=100) == singles
    assert len(singles) == 24
    db.close()


def test_other_window_settings_shape_the_features(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=20, corrected=lambda t: int(t * 48)))
    p = params(consecutive_windows=5, growth_window_hours=12, baseline_days=3)
    [f] = card_features(db, [at(20)], "real", p)
    assert f.corrected == tuple(int((20 - i / 2) * 48) for i in range(6))
    assert f.corrected_baseline == 17 * 48
    db.close()


def test_duplicate_rows_at_one_instant_do_not_break_extraction(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=10, corrected=const(4)))
    insert_samples(db, [Sample(CardKey("n1", 0), "GPU-a", START + timedelta(days=10),
                               Counters(ecc_corrected_total=4))])
    assert one(db, 10).corrected == (4, 4, 4, 4)
    db.close()


def reference(rows: list[Sample], when: datetime, p: RuleParams) -> CardFeatures | None:
    """The documented semantics, written naively in Python for one card."""
    past = sorted((r for r in rows if r.sampled_at <= when), key=lambda r: r.sampled_at)
    if not past or past[-1].sampled_at < when - p.boundary_max_age:
        return None
    head = past[-1]
    same = [r for r in past if r.gpu_uuid == head.gpu_uuid]

    def value(attr: str, b: datetime) -> int | None:
        known = [r for r in same if b - p.boundary_max_age <= r.sampled_at <= b
                 and getattr(r.counters, attr) is not None]
        return getattr(known[-1].counters, attr) if known else None

    t0, g = head.sampled_at, p.growth_window
    at_t0 = [value(a, t0) for a in ("ecc_corrected_total", "ecc_uncorrected_total",
                                    "remapped_rows_failure", "remapped_rows_pending",
                                    "retired_pages")]
    if all(v is None for v in at_t0):
        return None
    return CardFeatures(
        node_id=head.key.node_id, gpu_index=head.key.gpu_index, gpu_uuid=head.gpu_uuid,
        source=head.key.source, at=when, t0=t0,
        corrected=tuple(value("ecc_corrected_total", t0 - i * g)
                        for i in range(p.consecutive_windows + 1)),
        corrected_baseline=value("ecc_corrected_total", t0 - p.baseline),
        baseline_samples=sum(1 for r in same if t0 - p.baseline < r.sampled_at <= t0
                             and r.counters.ecc_corrected_total is not None),
        uncorrected=at_t0[1], remap_failure=at_t0[2], remap_pending=at_t0[3],
        remap_pending_before=value("remapped_rows_pending", t0 - g), retired_pages=at_t0[4],
        retired_pages_before=value("retired_pages", t0 - g),
    )


def irregular_card(rng: random.Random, gpu: int) -> list[Sample]:
    """Jittered 3-40 minute gaps, some hours-long holes, NULL cells, a mid-way card swap."""
    rows: list[Sample] = []
    t = START + timedelta(seconds=rng.randrange(3600))
    swap = START + timedelta(days=rng.uniform(2, 9))
    uuid_before, uuid_after = (None if gpu == 0 else f"GPU-{gpu}"), f"GPU-{gpu}-b"
    value = 0
    while t < START + timedelta(days=12):
        value += rng.randrange(0, 20)

        def maybe(v: int) -> int | None:
            return None if rng.random() < 0.15 else v

        rows.append(Sample(
            CardKey("n1", gpu), uuid_after if rng.random() < 0.3 and t > swap else uuid_before,
            t, Counters(maybe(value // 50), maybe(value), maybe(3), maybe(int(t > swap)),
                        maybe(0)),
        ))
        gap = rng.choice([3, 5, 5, 7, 13, 40]) if rng.random() > 0.01 else rng.randrange(90, 400)
        t += timedelta(minutes=gap, seconds=rng.randrange(60))
    return rows


@pytest.mark.parametrize("max_age", [60, 20, 150])  # PostgreSQL: value range vs partial hour
def test_sql_matches_the_documented_semantics_on_irregular_data(new_db: NewDb,
                                                                max_age: int) -> None:
    rng = random.Random(20260101)
    db = new_db()
    cards = [irregular_card(rng, gpu) for gpu in range(4)]
    load(db, *cards)
    p = params(boundary_max_age_minutes=max_age)
    times = [START + timedelta(days=8, minutes=rng.randrange(4 * 1440)) for _ in range(12)]
    expected = sorted(
        (f for when in times for rows in cards if (f := reference(rows, when, p))),
        key=lambda f: (f.at, f.node_id, f.gpu_index),
    )
    assert len(expected) >= 20
    assert card_features(db, times, "real", p, chunk=5) == expected
    db.close()


def test_card_filter_keeps_only_those_cards_and_their_values(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=10, corrected=quadratic(2, onset=1)),
         series("n1", 1, "GPU-b", start=0, end=10, corrected=const(3)),
         series("n2", 0, "GPU-c", start=0, end=10, corrected=const(4)))
    times = [at(8), at(9), at(10)]
    every = card_features(db, times, "real", PARAMS)
    some = card_features(db, times, "real", PARAMS, cards=[("n1", 0), ("n2", 0)])
    assert some == [f for f in every if (f.node_id, f.gpu_index) != ("n1", 1)]
    assert len(some) == 6
    assert card_features(db, times, "real", PARAMS, cards=[]) == []
    db.close()


def test_shards_on_postgresql_give_the_one_statement_result(request: pytest.FixtureRequest,
                                                            tmp_path: Path) -> None:
    """PostgreSQL splits the statement by card over connections (``feature_shards``); any
    number of shards yields the same features in the same order, node ids compared as bytes
    (C collation) whatever their case or script."""
    db = open_store(request, "postgresql", tmp_path, "shards")
    nodes = ["n1", "n10", "n2", "N1", "node-\u00e4", "node-z", "\u7b97\u529b-3"]
    load(db, *(series(node, gpu, f"GPU-{node}-{gpu}", start=0, end=9,
                      corrected=quadratic(gpu + 1, onset=1) if gpu % 2 else const(gpu))
               for node in nodes for gpu in range(3)))
    times = [at(8), at(8.5), at(9)]
    db.feature_shards = 1
    one_statement = card_features(db, times, "real", PARAMS)
    assert len(one_statement) == 3 * len(nodes) * 3
    assert [(f.at, f.node_id.encode(), f.gpu_index) for f in one_statement] == sorted(
        (f.at, f.node_id.encode(), f.gpu_index) for f in one_statement)
    for shards in (2, 3, 5):
        db.feature_shards = shards
        assert card_features(db, times, "real", PARAMS) == one_statement
        assert card_features(db, times, "real", PARAMS, chunk=1) == one_statement
    db.close()


def test_the_weak_layer_is_read_at_t0_and_a_window_before_only_for_a_rule_that_reads_it(
        new_db: NewDb) -> None:
    """Thermal slowdown, PCIe replays and NVLink errors at t0 and t0 - g, the link at t0, from
    the same boundary rows as the counters (same UUID, at most max_age old; unknown stays
    unknown)."""
    db = new_db()
    rows = []
    for i in range(10 * 48 + 1):  # every 30 minutes for 10 days; heat from day 9 on
        t = i / 48
        rows.append(Sample(CardKey("n1", 0), "GPU-a", at(t), Counters(0, 5), CardDetails(
            hw_thermal_slowdown_us=int(max(0.0, t - 9) * 86_400e6),
            pcie_link_width=8 if t >= 9.5 else 16, pcie_link_width_max=16,
            pcie_replays=40 + max(0, i - 400) * 25, nvlink_errors=max(0, i - 450))))
    insert_samples(db, rows)
    weak = params(weak_gate="evidence")
    (f,) = card_features(db, [at(10)], "real", weak)
    assert (f.hw_thermal_slowdown_us, f.hw_thermal_slowdown_us_before) == (86_400_000_000, 0)
    assert (f.sw_thermal_slowdown_us, f.sw_thermal_slowdown_us_before) == (None, None)
    assert (f.pcie_link_width, f.pcie_link_width_max) == (8, 16)
    assert (f.pcie_replays, f.pcie_replays_before) == (40 + 80 * 25, 40 + 32 * 25)
    assert (f.nvlink_errors, f.nvlink_errors_before) == (30, 0)
    assert f.corrected == one(db, 10).corrected  # the counters as a rule without it reads them
    (plain,) = card_features(db, [at(10)], "real", PARAMS)
    assert (plain.hw_thermal_slowdown_us, plain.pcie_link_width) == (None, None)  # not read
    db.close()
