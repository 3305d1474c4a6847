"""Feature extraction for the rule engine: boundary values of ALL cards in one statement.

For each evaluation time ``at`` and each card (node, index) of one source:

- ``t0`` is the stored ``sampled_at`` of the card's last sample with ``sampled_at <= at`` (the
  explicit upper bound: a future-dated row never pushes t0 forward). Cards whose last sample is
  older than ``boundary_max_age`` are not evaluated: their collection has stalled, and a
  prediction whose window started in the past could only be voided;
- the card's UUID is the one of its t0 sample;
- a boundary value at time ``b`` is, per counter, the last non-NULL value of a sample with the same
  UUID in ``[b - boundary_max_age, b]``, else unknown (None). Boundaries are ``t0 - i*g`` for
  i in 0..k and ``t0 - B``. A card with no known counter at t0 is not evaluated (it is not
  currently monitorable: no signal could use it);
- ``baseline_samples`` counts same-UUID samples with a known correctable count in
  ``(t0 - B, t0]``.

How it scales (a tick covers thousands of cards; a backtest replays thousands of ticks through
this same function, ``chunk`` evaluation times per statement):

- every row that can be a boundary value lies in ``[min(at) - off - 2*max_age - 1h,
  max(at) - off]`` for one of the few offsets ``off``; only those slices are scanned (merged so
  no row is read twice; DuckDB skips row groups by their ``sampled_at`` range), so the cost follows
  the number of cards, not the retention period;
- boundary values come from one equi-join on (card, UUID, time bucket of width max_age): a row
  only meets the boundaries within two buckets of it, never every evaluation time;
- the baseline count takes cumulative per-hour counts for the whole hours of the span (ASOF
  lookups) and counts the rows of the two partial hours exactly, so it too never pairs rows with
  evaluation times;
- ``cards`` restricts every scan to the given cards (the backtest replays only the cards that
  can fire; the slices are still read, the joins and aggregates follow those cards);
- on PostgreSQL, which runs each statement on one core, the cards are split into
  ``db.feature_shards`` shards (a hash of the card), one statement each on its own connection,
  at once (16,384 cards: 4.4 s -> 2.1-2.5 s with two; DuckDB already uses every core).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from gpu_health.evaluator.model import CardSlot
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.rules.signals import (
    could_fire_with,
    fires_at_any_threshold,
    last_increase,
)
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.predictions.features_sql import WEAK_PIVOTS, build_sql, offsets
from gpu_health.evaluator.store.readings.rollups import day_floor, watermark


def card_features(
    db: Database,
    at: Sequence[datetime],
    source: str,
    params: RuleParams,
    *,
    chunk: int = 48,
    cards: Sequence[CardSlot] | None = None,
) -> list[CardFeatures]:
    """Features of every evaluable card of ``source`` at each time in ``at`` (aware UTC),
    ordered by (at, node_id, gpu_index). ``chunk`` evaluation times go into one statement.
    ``cards``: only these (node, index) cards (None: all)."""
    return [row_to_features(row, source, params)
            for row in feature_rows(db, at, source, params, chunk=chunk, cards=cards)]


def feature_rows(db: Database, at: Sequence[datetime], source: str, params: RuleParams, *,
                 chunk: int = 48, cards: Sequence[CardSlot] | None = None) -> list[Any]:
    """The rows :func:`card_features` builds its features from (naive UTC times; a replay
    that decides few of them converts only those, :func:`row_to_features`)."""
    times = sorted(set(at))
    size = max(1, chunk)
    result: list[Any] = []
    for start in range(0, len(times), size):
        part = times[start:start + size]
        slices = _slices(part[0], part[-1], params)
        values = _params(part, slices, source, params) | _hour_counts(db, part[0], params)
        if cards is not None:
            values |= {"card_nodes": [c[0] for c in cards], "card_idx": [c[1] for c in cards]}
        result += _fetch(db, params, len(slices), cards is not None, values)
    return result


def _fetch(db: Database, params: RuleParams, n_slices: int, cards: bool,
           values: dict[str, Any]) -> list[Any]:
    """The statement's rows, ordered by (at, node_id, gpu_index). With ``db.feature_shards``
    above 1 (PostgreSQL runs one statement on one core; DuckDB uses every core itself), one
    statement per shard of the cards, each on its own connection, at once."""
    shards = db.feature_shards
    if shards <= 1:
        return db.fetchall(build_sql(params, n_slices, db.dialect, cards), values)
    sql = build_sql(params, n_slices, db.dialect, cards, sharded=True)
    with ThreadPoolExecutor(max_workers=shards, thread_name_prefix="features") as pool:
        parts = pool.map(lambda i: db.fetchall(sql, values | {"shards": shards, "shard": i}),
                         range(shards))
        rows = [row for part in parts for row in part]
    # node ids compare as bytes on both engines (C collation), as Python's str order does
    return sorted(rows, key=lambda row: tuple(row[:3]))


def _slices(lo: datetime, hi: datetime, params: RuleParams) -> list[tuple[datetime, datetime]]:
    """Disjoint time ranges holding every row a boundary value or partial hour can come from."""
    # A boundary b = t0 - offset, t0 up to max_age before the tick, reads rows in
    # [b - max_age, b] (its value) and [hour of b, b] (the partial hour of the baseline count);
    # nothing older. (It was 2 x max_age + 1 h: 3 h instead of 2 h of rows at max_age = 1 h,
    # which PostgreSQL materialises and sorts.)
    margin = params.boundary_max_age + max(params.boundary_max_age, timedelta(hours=1))
    ranges = sorted((lo - timedelta(seconds=off) - margin, hi - timedelta(seconds=off))
                    for off in set(offsets(params)))
    merged: list[tuple[datetime, datetime]] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _params(times: list[datetime], slices: list[tuple[datetime, datetime]], source: str,
            params: RuleParams) -> dict[str, Any]:
    values: dict[str, Any] = {
        "ats": times,
        "lo": times[0],
        "hi": times[-1],
        "source": source,
        "max_age": params.boundary_max_age_minutes * 60,
        "bucket_us": params.boundary_max_age_minutes * 60_000_000,
        "baseline": params.baseline_days * 86400,
        "offs": offsets(params),
        "js": list(range(len(offsets(params)))),
    }
    for i, (start, end) in enumerate(slices):
        values[f"s{i}"], values[f"e{i}"] = start, end
    return values


def _hour_counts(db: Database, lo: datetime, params: RuleParams) -> dict[str, Any]:
    """Where the hourly counts of the baseline come from: the sealed days' rollups from
    ``$day_lo`` to ``$sealed``, the raw rows from ``$raw_lo`` on."""
    first = lo - timedelta(minutes=params.boundary_max_age_minutes, days=params.baseline_days,
                           hours=1)
    sealed = watermark(db)
    return {"day_lo": day_floor(first), "sealed": sealed,
            "raw_lo": max(first, sealed)}


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def row_quick_test(row: Sequence[Any], k: int) -> tuple[bool, int | None]:
    """The two halves of :func:`gpu_health.evaluator.rules.signals.could_fire` read off a
    :func:`feature_rows` row (``k``: the rows' ``consecutive_windows``): whether a signal may
    fire at any threshold, and the last growth window's correctable increase (None: unknown),
    the one number the growth gate compares with ``min_increase``."""
    unc, fail, pend, pend_before, ret, ret_before = row[7 + k + 1:7 + k + 7]
    return (fires_at_any_threshold(unc, fail, pend, pend_before, ret, ret_before),
            last_increase(row[6], row[7]))


def row_could_fire(row: Sequence[Any], params: RuleParams) -> bool:
    """``could_fire(row_to_features(row, ...), params)`` without building the features: a tick
    builds them only for the few cards that pass (100,000 cards: most of a second saved)."""
    return could_fire_with(*row_quick_test(row, params.consecutive_windows), params)


def row_to_features(row: Sequence[Any], source: str, params: RuleParams) -> CardFeatures:
    """One row of :func:`feature_rows` as the engine's features."""
    at, node_id, gpu_index, gpu_uuid, t0, n_corr, *rest = row
    n_offsets = params.consecutive_windows + 2
    corr, (unc0, fail0, pend0, pend1, ret0, ret1) = rest[:n_offsets], rest[n_offsets:n_offsets + 6]
    hw0, hw1, sw0, sw1, width, width_max, rep0, rep1, nvl0, nvl1 = (
        [_int(v) for v in rest[n_offsets + 6:]] or [None] * len(WEAK_PIVOTS))
    return CardFeatures(
        node_id=str(node_id),
        gpu_index=int(gpu_index),
        gpu_uuid=None if gpu_uuid is None else str(gpu_uuid),
        source=source,
        at=at,
        t0=t0,
        corrected=tuple(_int(v) for v in corr[:-1]),
        corrected_baseline=_int(corr[-1]),
        baseline_samples=int(n_corr),
        uncorrected=_int(unc0),
        remap_failure=_int(fail0),
        remap_pending=_int(pend0),
        remap_pending_before=_int(pend1),
        retired_pages=_int(ret0),
        retired_pages_before=_int(ret1),
        hw_thermal_slowdown_us=hw0,
        hw_thermal_slowdown_us_before=hw1,
        sw_thermal_slowdown_us=sw0,
        sw_thermal_slowdown_us_before=sw1,
        pcie_link_width=width,
        pcie_link_width_max=width_max,
        pcie_replays=rep0,
        pcie_replays_before=rep1,
        nvlink_errors=nvl0,
        nvlink_errors_before=nvl1,
    )
