"""Property: for any history of one card, the store says what the raw rows say.

Hypothesis draws rows at irregular times over four days (counts that rise, fall and go unknown,
a UUID change), a prediction window, a period and a time to look. The backfill observation and
the statistics' fault, exposure and sample bounds are checked against a plain Python reading of
the same rows (an oracle independent of the SQL), on a store read from raw rows only and on the
same store sealed into daily rollups.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.rules.outcome import WindowObservation
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.predictions.backfill import observe_pending
from gpu_health.evaluator.store.readings import rollups
from gpu_health.evaluator.store.readings.samples import insert_samples
from gpu_health.evaluator.store.statistics.stats_queries import Fault, raw_stats
from tests.evaluator.rules_support import at, insert_prediction

ROW = st.tuples(st.integers(1, 600),  # minutes after the previous row
                # the uncorrectable count: unchanged, one more, reset to 0, or unknown this row
                st.sampled_from(["same", "same", "same", "up", "reset", "unknown"]),
                st.integers(0, 11).map(lambda n: n == 0))  # from here on: the second UUID
HISTORY = st.lists(ROW, min_size=3, max_size=60)


@dataclass(frozen=True)
class Case:
    rows: list[Sample]
    t0: datetime
    window_end: datetime
    unc0: int | None
    since: datetime
    now: datetime


def _rows(history: list[tuple[int, str, bool]]) -> list[Sample]:
    rows, t, swapped, count = [], at(0), False, 1
    for minutes, step, swap in history:
        t += timedelta(minutes=minutes)
        swapped = swapped or swap
        count = count + 1 if step == "up" else 0 if step == "reset" else count
        rows.append(Sample(CardKey("n", 0), "GPU-b" if swapped else "GPU-a", t,
                           Counters(None if step == "unknown" else count, 1, None, None, None)))
    return rows


def _first_increase(series: list[tuple[datetime, int]]) -> tuple[datetime, int, int] | None:
    for (_, before), (at_, after) in pairwise(series):
        if after > before:
            return at_, before, after
    return None


def expected_observation(c: Case) -> WindowObservation | None:
    if c.t0 >= c.now:
        return None
    upto = min(c.window_end, c.now)
    inside = [r for r in c.rows if c.t0 < r.sampled_at <= upto]
    same = [r for r in inside if r.gpu_uuid == "GPU-a"]
    other = [r for r in inside if r.gpu_uuid != "GPU-a"]
    known = [(r.sampled_at, r.counters.ecc_uncorrected_total) for r in same
             if r.counters.ecc_uncorrected_total is not None]
    event = _first_increase(([(c.t0, c.unc0)] if c.unc0 is not None else []) + known)
    matured = c.window_end <= c.now
    if not matured and event is None:
        return None
    return WindowObservation(
        prediction_id="p", gpu_uuid="GPU-a", matured=matured, samples=len(inside),
        other_uuid_samples=len(other), other_uuid=other[0].gpu_uuid if other else None,
        other_uuid_at=other[0].sampled_at if other else None, known_uncorrected=len(known),
        uncorrected_at_t0=c.unc0, max_uncorrected=max((v for _, v in known), default=None),
        last_sample_at=inside[-1].sampled_at if inside else None,
        fault_at=event[0] if event else None, fault_before=event[1] if event else None,
        fault_after=event[2] if event else None)


def expected_stats(c: Case) -> tuple[object, ...]:
    period = [r for r in c.rows if c.since <= r.sampled_at <= c.now]
    faults, exposure = [], 0.0
    for uuid in sorted({r.gpu_uuid for r in period}, key=str):
        rows = [r for r in period if r.gpu_uuid == uuid]
        exposure += (rows[-1].sampled_at - rows[0].sampled_at).total_seconds()
        known = [(r.sampled_at, r.counters.ecc_uncorrected_total) for r in rows
                 if r.counters.ecc_uncorrected_total is not None]
        event = _first_increase(known)
        if event is None:
            continue
        seen = [r.sampled_at for r in c.rows if r.gpu_uuid == uuid and r.sampled_at <= c.now
                and (r.counters.ecc_uncorrected_total or 0) > 0]
        predicted = frozenset({(c.window_end - c.t0).days}) if (
            uuid == "GPU-a" and c.t0 < event[0] <= c.window_end) else frozenset()
        faults.append(Fault("n", 0, uuid, event[0], predicted,
                            first=not seen or min(seen) >= event[0]))
    return (len({r.gpu_uuid for r in period}), exposure,
            period[0].sampled_at if period else None, period[-1].sampled_at if period else None,
            tuple(sorted(faults, key=lambda f: f.first_fault_at)))


def _store(c: Case, window: int, seal: bool) -> Database:
    db = DuckDBDatabase(":memory:")
    insert_samples(db, c.rows)
    insert_prediction(db, pid="p", node="n", gpu=0, uuid="GPU-a", t0=c.t0, window_days=window,
                      unc0=c.unc0)
    if seal:
        rollups.seal(db, at(5))
    return db


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=HISTORY, t0_hours=st.integers(0, 60), window=st.integers(1, 2),
       unc0=st.one_of(st.none(), st.integers(0, 3)), since_hours=st.integers(0, 60),
       now_hours=st.integers(1, 110))
def test_store_matches_a_plain_reading_of_the_rows(
        history: list[tuple[int, str, bool]], t0_hours: int, window: int,
        unc0: int | None, since_hours: int, now_hours: int) -> None:
    t0 = at(0) + timedelta(hours=t0_hours, minutes=7)
    c = Case(_rows(history), t0, t0 + timedelta(days=window), unc0,
             at(0) + timedelta(hours=since_hours), at(0) + timedelta(hours=now_hours))
    observation, stats = expected_observation(c), expected_stats(c)
    for seal in (False, True):
        db = _store(c, window, seal)
        try:
            assert observe_pending(db, c.now) == ([observation] if observation else []), seal
            got = raw_stats(db, since=c.since, until=c.now, source="real", nodes=None)
            assert (got.monitorable_cards, got.exposure_seconds, got.first_sample,
                    got.last_sample, got.faults) == stats, seal
        finally:
            db.close()
