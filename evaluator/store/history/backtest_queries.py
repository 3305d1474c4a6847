"""The backtest's queries over its own file: the replay's plans and the report's counts.

Set-based, one statement per question: in which time buckets a card could fire a known signal
(:mod:`gpu_health.evaluator.backtest.activity` derives the bucket counts and argues why), the
uncorrectable increase points (:data:`ECC_INCREASES`, over the raw rows of a backtest file: the
points the statistics find from segments, :mod:`gpu_health.evaluator.store.rollup_sql`), a version's
predictions already in the file, and the report's per-version counts and base rates. Nothing
here runs against a live store: :mod:`gpu_health.evaluator.store.history.backtest` only hands out
backtest files.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.model import FirstFault
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.sql import fill_statement

_US: Final = timedelta(microseconds=1)

# Cards whose counters ever move (or show a fault or remap failure): the only ones any known
# signal can fire for (see :mod:`gpu_health.evaluator.backtest.activity`); one cheap aggregate that
# keeps the per-bucket pass below to those cards.
_CHANGING: Final = """
    SELECT node_id, gpu_index FROM gpu_health_samples WHERE source = $source
    GROUP BY node_id, gpu_index
    HAVING max(ecc_uncorrected_total) > 0 OR max(remapped_rows_failure) > 0
        OR max(ecc_corrected_total) - min(ecc_corrected_total) >= $min_inc
        OR max(remapped_rows_pending) > min(remapped_rows_pending)
        OR max(retired_pages) > min(retired_pages)"""

_ACTIVE: Final = """WITH cards AS ({changing}),
        b AS (
            SELECT node_id, gpu_index, epoch_us(sampled_at) // $w AS k,
                   min(ecc_corrected_total) AS c_lo, max(ecc_corrected_total) AS c_hi,
                   count(ecc_corrected_total) AS c_n,
                   min(remapped_rows_pending) AS p_lo, max(remapped_rows_pending) AS p_hi,
                   min(retired_pages) AS r_lo, max(retired_pages) AS r_hi,
                   max(ecc_uncorrected_total) AS u_hi, max(remapped_rows_failure) AS f_hi
            FROM gpu_health_samples s
            WHERE source = $source AND EXISTS (SELECT 1 FROM cards c
                WHERE c.node_id = s.node_id AND c.gpu_index = s.gpu_index)
            GROUP BY node_id, gpu_index, epoch_us(sampled_at) // $w
        ),
        w AS (
            SELECT node_id, gpu_index, k,
                   greatest(max(u_hi) OVER s, max(f_hi) OVER s) AS strong_hi,
                   max(c_hi) OVER t - min(c_lo) OVER t AS c_span,
                   max(p_hi) OVER t - min(p_lo) OVER t AS p_span,
                   max(r_hi) OVER t - min(r_lo) OVER t AS r_span,
                   sum(c_n) OVER base AS base_n
            FROM b
            WINDOW s AS (PARTITION BY node_id, gpu_index ORDER BY k
                         RANGE BETWEEN {strong} PRECEDING AND CURRENT ROW),
                   t AS (PARTITION BY node_id, gpu_index ORDER BY k
                         RANGE BETWEEN {trend} PRECEDING AND CURRENT ROW),
                   base AS (PARTITION BY node_id, gpu_index ORDER BY k
                            RANGE BETWEEN {lo} PRECEDING AND {base_end})
        ),
        act AS (
            SELECT node_id, gpu_index, 'strong' AS kind, k FROM w WHERE strong_hi > 0
            UNION ALL
            SELECT node_id, gpu_index, 'trend' AS kind, k FROM w
            WHERE (c_span >= $min_inc AND base_n > 0) OR p_span > 0 OR r_span > 0
        )
        SELECT node_id, gpu_index, kind, min(k), max(k) + 1 FROM (
            SELECT *, k - row_number() OVER (PARTITION BY node_id, gpu_index, kind ORDER BY k)
                   AS run
            FROM act) AS a
        GROUP BY node_id, gpu_index, kind, run ORDER BY 1, 2, 3, 4"""

# The uncorrectable-ECC increase points of the cards of a CTE ``cand`` (node_id, gpu_index,
# gpu_uuid) among their rows in [$since, $until]: rows whose known count is above the previous
# known count of the same series (node, index, UUID). The backtest's replay plan reads the same
# points (:mod:`gpu_health.evaluator.store.history.backtest_queries`).
ECC_INCREASES: Final = """
    SELECT node_id, gpu_index, gpu_uuid, sampled_at FROM (
        SELECT s.node_id, s.gpu_index, s.gpu_uuid, s.sampled_at,
               s.ecc_uncorrected_total AS unc,
               lag(s.ecc_uncorrected_total) OVER (
                   PARTITION BY s.node_id, s.gpu_index, s.gpu_uuid ORDER BY s.sampled_at
               ) AS prev
        FROM gpu_health_samples s
        WHERE s.source = $source AND s.sampled_at >= $since AND s.sampled_at <= $until
          AND s.ecc_uncorrected_total IS NOT NULL AND EXISTS (
              SELECT 1 FROM cand c WHERE c.node_id = s.node_id AND c.gpu_index = s.gpu_index
                                     AND c.gpu_uuid IS NOT DISTINCT FROM s.gpu_uuid)) AS r
    WHERE unc > prev"""



def active_ranges(db: Database, *, bucket: timedelta, strong: int, trend: int,
                  base: tuple[int, int], min_increase: int
                  ) -> list[tuple[str, int, str, int, int]]:
    """(node, index, kind, first, last) runs of buckets ``[k*bucket, (k+1)*bucket)`` in which
    a card could fire a known signal at some tick (:mod:`gpu_health.evaluator.backtest.activity`
    derives the bucket counts), among the cards whose counters move at all. Over the card's rows in
    the last ``strong`` buckets: an uncorrectable count or a row-remap failure above 0 (kind
    ``strong``); over the last ``trend`` buckets (kind ``trend``): the correctable count spans
    at least ``min_increase`` while a known correctable count exists ``base`` buckets back
    (from ``base[0]`` to ``base[1]``; negative: ahead), or pending remaps or retired pages
    changed. Each run is extended by one bucket (a tick in a bucket without rows reads the
    bucket before it, whose windows contain its own)."""
    lo, hi = base
    base_end = f"{hi} PRECEDING" if hi >= 0 else f"{-hi} FOLLOWING"
    rows = db.fetchall(
        fill_statement(_ACTIVE, changing=_CHANGING, strong=strong, trend=trend, lo=lo,
                base_end=base_end),
        {"w": bucket // _US, "source": SOURCE_REAL, "min_inc": min_increase},
    )
    return [(str(n), int(i), str(kind), int(a), int(b)) for n, i, kind, a, b in rows]


def uncorrected_increase_points(db: Database, since: datetime,
                                until: datetime) -> list[FirstFault]:
    """Every (node, index, UUID, time) in ``[since, until]`` at which a card's known
    uncorrectable count rose above its previous known value in that span: a superset of the
    fault events backfill can find in windows whose t0 sample is in the span."""
    rows = db.fetchall(
        f"""WITH cand AS (
            SELECT node_id, gpu_index, gpu_uuid FROM gpu_health_samples
            WHERE source = $source AND ecc_uncorrected_total IS NOT NULL
              AND sampled_at >= $since AND sampled_at <= $until
            GROUP BY node_id, gpu_index, gpu_uuid
            HAVING max(ecc_uncorrected_total) > min(ecc_uncorrected_total)
        )
        {ECC_INCREASES} ORDER BY sampled_at""",
        {"source": SOURCE_REAL, "since": since, "until": until},
    )
    return [(str(n), int(i), None if u is None else str(u), at)
            for n, i, u, at in rows]


def existing_predictions(db: Database, version: str) -> tuple[
        list[tuple[str, int, datetime]], list[tuple[str, str, int, str | None, datetime,
                                                     datetime]]]:
    """A file replayed again already holds ``version``'s predictions: per card the end of its
    last window (the insert refuses any decision whose t0 is before it), and the pending ones
    (id, node, index, UUID, t0, window end)."""
    pending = db.fetchall("SELECT id, node_id, gpu_index, gpu_uuid, t0, window_end "
                          "FROM gpu_health_predictions WHERE rule_version = $version "
                          "AND status = 'pending' ORDER BY t0", {"version": version})
    return (window_ends(db, version),
            [(str(p), str(n), int(i), None if u is None else str(u), t, e)
             for p, n, i, u, t, e in pending])


def window_ends(db: Database, version: str) -> list[tuple[str, int, datetime]]:
    """Per card, the end of ``version``'s last window in the file (the insert refuses any
    decision whose t0 is before it)."""
    rows = db.fetchall("SELECT node_id, gpu_index, max(window_end) FROM gpu_health_predictions "
                       "WHERE rule_version = $version GROUP BY node_id, gpu_index",
                       {"version": version})
    return [(str(n), int(i), e) for n, i, e in rows]


def counts_by(db: Database, version: str, column: str) -> dict[str, dict[str, int]]:
    """{layer or signal: {status: n}} of one version's predictions."""
    assert column in ("layer", "signal")
    result: dict[str, dict[str, int]] = {}
    for key, status, n in db.fetchall(
        f"SELECT {column}, status, count(*) FROM gpu_health_predictions "
        "WHERE rule_version = $version GROUP BY ALL ORDER BY ALL", {"version": version},
    ):
        result.setdefault(str(key), {})[str(status)] = int(n)
    return result


_FAULTS: Final = """f AS (
    SELECT unnest($n::VARCHAR[]) AS node_id, unnest($i::INTEGER[]) AS gpu_index,
           unnest($u::VARCHAR[]) AS gpu_uuid, unnest($at::TIMESTAMP[]) AS at)"""


def _fault_params(faults: Sequence[FirstFault]) -> dict[str, Any]:
    return {"n": [f[0] for f in faults], "i": [f[1] for f in faults],
            "u": [f[2] for f in faults], "at": [f[3] for f in faults]}


# Each fault joined to the version's predictions whose window (t0, window_end] holds it, one
# group per fault (``$v``: the version).
_HELD: Final = """f JOIN gpu_health_predictions p
          ON p.node_id = f.node_id AND p.gpu_index = f.gpu_index
         AND p.gpu_uuid IS NOT DISTINCT FROM f.gpu_uuid AND p.rule_version = $v
         AND p.t0 < f.at AND f.at <= p.window_end
        GROUP BY f.node_id, f.gpu_index, f.gpu_uuid, f.at"""


def lead_times(db: Database, version: str, faults: Sequence[FirstFault], *,
               warned: bool = False) -> list[timedelta]:
    """For each fault (node, index, uuid, first fault), the time from the t0 of the version's
    prediction whose window ``(t0, window_end]`` holds it (``warned``: from the moment that
    prediction was made, when an operator could act on it); faults no window holds are left
    out. Sorted."""
    if not faults:
        return []
    start = "predicted_at" if warned else "t0"
    rows = db.fetchall(
        f"""WITH {_FAULTS}
        SELECT f.at - min(p.{start}) FROM {_HELD}""",
        {**_fault_params(faults), "v": version},
    )
    return sorted(r[0] for r in rows)


def credited_from_before(db: Database, version: str, faults: Sequence[FirstFault],
                         since: datetime) -> int:
    """How many of ``faults`` a window of the version holds that opened (its prediction's t0)
    before ``since``: in a split, a window of the other part."""
    if not faults:
        return 0
    row = db.fetchone(
        f"""WITH {_FAULTS}
        SELECT count(*) FROM (SELECT 1 FROM {_HELD} HAVING min(p.t0) < $since) x""",
        {**_fault_params(faults), "v": version, "since": since},
    )
    return int(row[0]) if row else 0


def preceded_by_correctable(db: Database, faults: Sequence[FirstFault]) -> int:
    """How many faults have, on the same card, a sample with a known correctable count above 0
    strictly before the fault: the most any correctable-ECC rule could ever predict."""
    if not faults:
        return 0
    row = db.fetchone(
        f"""WITH {_FAULTS}
        SELECT count(*) FROM f WHERE EXISTS (
            SELECT 1 FROM gpu_health_samples s
            WHERE s.source = $source AND s.node_id = f.node_id AND s.gpu_index = f.gpu_index
              AND s.gpu_uuid IS NOT DISTINCT FROM f.gpu_uuid AND s.sampled_at < f.at
              AND s.ecc_corrected_total > 0)""",
        {**_fault_params(faults), "source": SOURCE_REAL},
    )
    return int(row[0])


def card_count(db: Database) -> int:
    return int(db.fetchone("SELECT count(*) FROM (SELECT DISTINCT node_id, gpu_index FROM "
                           "gpu_health_samples WHERE source = $source)",
                           {"source": SOURCE_REAL})[0])
