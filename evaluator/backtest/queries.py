"""The backtest's SQL over its own DuckDB file, all through :class:`~evaluator.store.db.Database`.

Set-based, one statement per question (the house rule for the store): bulk expansion of counter
histories into rows, the replay's activity and fault-point scans, and the report's per-version
counts. Nothing here runs against a live store: :mod:`evaluator.backtest.store` only hands out
backtest files.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from evaluator.store.db import Database
from gpu_health.clock import from_naive_utc, to_naive_utc
from gpu_health.contract import SOURCE_REAL

_US = timedelta(microseconds=1)


def stage_segments(db: Database, rows: Sequence[tuple[Any, ...]]) -> None:
    """(node, index, first, last, unc, corr) runs into a connection-local temporary table."""
    cols: list[list[Any]] = [[r[i] for r in rows] for i in range(6)]
    cols[2] = [to_naive_utc(t) for t in cols[2]]
    cols[3] = [to_naive_utc(t) for t in cols[3]]
    db.execute(
        """CREATE OR REPLACE TEMP TABLE bt_segments AS
        SELECT unnest($1::VARCHAR[]) AS node_id, unnest($2::INTEGER[]) AS gpu_index,
               unnest($3::TIMESTAMP[]) AS first_at, unnest($4::TIMESTAMP[]) AS last_at,
               unnest($5::BIGINT[]) AS unc, unnest($6::BIGINT[]) AS corr""", cols)


def expand_segments(db: Database, start: datetime, end: datetime, period: timedelta) -> int:
    """Insert the rows of the staged runs that fall in ``[start, end)``: each run's first reading
    and every ``period`` after it, up to its last reading (the write rule's closed form, see
    :mod:`evaluator.backtest.history`), in time order. Returns the number inserted."""
    row = db.fetchone(
        f"""INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, sampled_at,
                ecc_uncorrected_total, ecc_corrected_total, retired_pages,
                remapped_rows_pending, remapped_rows_failure)
        SELECT node_id, gpu_index, NULL, '{SOURCE_REAL}', ts, unc, corr, NULL, NULL, NULL FROM (
            SELECT node_id, gpu_index, unc, corr, unnest(generate_series(
                first_at + to_microseconds(
                    greatest(0, (epoch_us($a) - epoch_us(first_at) + $p - 1) // $p) * $p),
                least(last_at, $a + to_microseconds($span - 1)),
                to_microseconds($p))) AS ts
            FROM bt_segments
            WHERE first_at < $a + to_microseconds($span) AND last_at >= $a)
        ORDER BY ts, node_id, gpu_index""",
        {"a": to_naive_utc(start), "span": (end - start) // _US, "p": period // _US},
    )
    return int(row[0])


def sample_span(db: Database) -> tuple[datetime | None, datetime | None, int]:
    row = db.fetchone("SELECT min(sampled_at), max(sampled_at), count(*) FROM gpu_health_samples "
                      "WHERE source = ?", [SOURCE_REAL])
    lo, hi, n = row
    return (None if lo is None else from_naive_utc(lo),
            None if hi is None else from_naive_utc(hi), int(n))


# Cards whose counters ever move (or show a fault or remap failure): the only ones any known
# signal can fire for (see :mod:`evaluator.backtest.activity`); one cheap aggregate.
_CHANGING = """
    SELECT node_id, gpu_index, count(*) AS n FROM gpu_health_samples WHERE source = $source
    GROUP BY node_id, gpu_index
    HAVING max(ecc_uncorrected_total) > 0 OR max(remapped_rows_failure) > 0
        OR max(ecc_corrected_total) - min(ecc_corrected_total) >= $min_inc
        OR max(remapped_rows_pending) > min(remapped_rows_pending)
        OR max(retired_pages) > min(retired_pages)"""


def changing_cards(db: Database, min_increase: int) -> tuple[dict[tuple[str, int], int], int]:
    """The cards some known signal could ever fire for with their row counts, and all rows."""
    rows = db.fetchall(_CHANGING, {"source": SOURCE_REAL, "min_inc": min_increase})
    total = db.fetchone("SELECT count(*) FROM gpu_health_samples WHERE source = ?",
                        [SOURCE_REAL])[0]
    return {(str(n), int(i)): int(k) for n, i, k in rows}, int(total)


def drop_sample_indexes(db: Database) -> None:
    """Drop the samples table's two ART indexes in a backtest file (or working copy). Nothing a
    backtest runs uses them: DuckDB answers time-range scans and joins from zone maps, and ART
    indexes only serve constant point lookups (the live API's). Keeping them makes the bulk
    import about twice as slow (measured 27 s vs 13 s for 26.5 M rows) and rebuilding them
    afterwards costs more than it saves (25 s)."""
    db.execute("DROP INDEX IF EXISTS idx_samples_card_time")
    db.execute("DROP INDEX IF EXISTS idx_samples_source")


_ACTIVE = """WITH cards AS ({changing}),
        b AS (
            SELECT node_id, gpu_index, epoch_us(sampled_at) // $w AS k,
                   min(ecc_corrected_total) AS c_lo, max(ecc_corrected_total) AS c_hi,
                   count(ecc_corrected_total) AS c_n,
                   min(remapped_rows_pending) AS p_lo, max(remapped_rows_pending) AS p_hi,
                   min(retired_pages) AS r_lo, max(retired_pages) AS r_hi,
                   max(ecc_uncorrected_total) AS u_hi, max(remapped_rows_failure) AS f_hi
            FROM gpu_health_samples s SEMI JOIN cards c USING (node_id, gpu_index)
            WHERE source = $source
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
            FROM act)
        GROUP BY node_id, gpu_index, kind, run ORDER BY 1, 2, 3, 4"""


def active_ranges(db: Database, *, bucket: timedelta, strong: int, trend: int,
                  base: tuple[int, int], min_increase: int
                  ) -> list[tuple[str, int, str, int, int]]:
    """(node, index, kind, first, last) runs of buckets ``[k*bucket, (k+1)*bucket)`` in which
    a card could fire a known signal at some tick (:mod:`evaluator.backtest.activity` derives
    the bucket counts), among the cards whose counters move at all. Over the card's rows in the
    last ``strong`` buckets: an uncorrectable count or a row-remap failure above 0 (kind
    ``strong``); over the last ``trend`` buckets (kind ``trend``): the correctable count spans
    at least ``min_increase`` while a known correctable count exists ``base`` buckets back
    (from ``base[0]`` to ``base[1]``; negative: ahead), or pending remaps or retired pages
    changed. Each run is extended by one bucket (a tick in a bucket without rows reads the
    bucket before it, whose windows contain its own)."""
    lo, hi = base
    base_end = f"{hi} PRECEDING" if hi >= 0 else f"{-hi} FOLLOWING"
    rows = db.fetchall(
        _ACTIVE.format(changing=_CHANGING, strong=strong, trend=trend, lo=lo,
                       base_end=base_end),
        {"w": bucket // _US, "source": SOURCE_REAL, "min_inc": min_increase},
    )
    return [(str(n), int(i), str(kind), int(a), int(b)) for n, i, kind, a, b in rows]


def uncorrected_increase_points(db: Database) -> list[tuple[str, int, str | None, datetime]]:
    """Every (node, index, UUID, time) at which a card's known uncorrectable count rose above
    its previous known value: a superset of the fault events backfill can find."""
    rows = db.fetchall(
        """WITH moved AS (
            SELECT node_id, gpu_index, gpu_uuid FROM gpu_health_samples
            WHERE source = $source AND ecc_uncorrected_total IS NOT NULL
            GROUP BY node_id, gpu_index, gpu_uuid
            HAVING max(ecc_uncorrected_total) > min(ecc_uncorrected_total)
        )
        SELECT node_id, gpu_index, gpu_uuid, sampled_at FROM (
            SELECT s.node_id, s.gpu_index, s.gpu_uuid, s.sampled_at,
                   s.ecc_uncorrected_total AS unc,
                   lag(s.ecc_uncorrected_total) OVER (
                       PARTITION BY s.node_id, s.gpu_index, s.gpu_uuid ORDER BY s.sampled_at
                   ) AS prev
            FROM gpu_health_samples s
            SEMI JOIN moved m ON m.node_id = s.node_id AND m.gpu_index = s.gpu_index
                             AND m.gpu_uuid IS NOT DISTINCT FROM s.gpu_uuid
            WHERE s.source = $source AND s.ecc_uncorrected_total IS NOT NULL)
        WHERE unc > prev ORDER BY sampled_at""",
        {"source": SOURCE_REAL},
    )
    return [(str(n), int(i), None if u is None else str(u), from_naive_utc(at))
            for n, i, u, at in rows]


def existing_predictions(db: Database, version: str) -> tuple[
        list[tuple[str, int, datetime]], list[tuple[str, str, int, str | None, datetime,
                                                     datetime]]]:
    """A file replayed again already holds ``version``'s predictions: per card the end of its
    last window (the insert refuses any decision whose t0 is before it), and the pending ones
    (id, node, index, UUID, t0, window end)."""
    ends = db.fetchall("SELECT node_id, gpu_index, max(window_end) FROM gpu_health_predictions "
                       "WHERE rule_version = ? GROUP BY node_id, gpu_index", [version])
    pending = db.fetchall("SELECT id, node_id, gpu_index, gpu_uuid, t0, window_end "
                          "FROM gpu_health_predictions WHERE rule_version = ? "
                          "AND status = 'pending' ORDER BY t0", [version])
    return ([(str(n), int(i), from_naive_utc(e)) for n, i, e in ends],
            [(str(p), str(n), int(i), None if u is None else str(u), from_naive_utc(t),
              from_naive_utc(e)) for p, n, i, u, t, e in pending])


def has_rows(db: Database, table: str) -> bool:
    """Whether ``table`` exists in the file and holds a row (tables of newer migrations)."""
    known = db.fetchone("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                        [table])[0]
    return bool(known) and db.fetchone(f"SELECT count(*) FROM {table} LIMIT 1")[0] > 0


def counts_by(db: Database, version: str, column: str) -> dict[str, dict[str, int]]:
    """{layer or signal: {status: n}} of one version's predictions."""
    assert column in ("layer", "signal")
    result: dict[str, dict[str, int]] = {}
    for key, status, n in db.fetchall(
        f"SELECT {column}, status, count(*) FROM gpu_health_predictions "
        "WHERE rule_version = ? GROUP BY ALL ORDER BY ALL", [version],
    ):
        result.setdefault(str(key), {})[str(status)] = int(n)
    return result


def lead_times(db: Database, version: str,
               faults: Sequence[tuple[str, int, str | None, datetime]]) -> list[timedelta]:
    """For each fault (node, index, uuid, first fault), the time from the t0 of the version's
    prediction whose window ``(t0, window_end]`` holds it; faults no window holds are left out."""
    if not faults:
        return []
    rows = db.fetchall(
        """WITH f AS (SELECT unnest($n::VARCHAR[]) AS node_id, unnest($i::INTEGER[]) AS gpu_index,
                             unnest($u::VARCHAR[]) AS gpu_uuid, unnest($at::TIMESTAMP[]) AS at)
        SELECT f.at - min(p.t0) FROM f JOIN gpu_health_predictions p
          ON p.node_id = f.node_id AND p.gpu_index = f.gpu_index
         AND p.gpu_uuid IS NOT DISTINCT FROM f.gpu_uuid AND p.rule_version = $v
         AND p.t0 < f.at AND f.at <= p.window_end
        GROUP BY f.node_id, f.gpu_index, f.gpu_uuid, f.at""",
        {"n": [f[0] for f in faults], "i": [f[1] for f in faults], "u": [f[2] for f in faults],
         "at": [to_naive_utc(f[3]) for f in faults], "v": version},
    )
    return sorted(r[0] for r in rows)


def preceded_by_correctable(db: Database,
                            faults: Sequence[tuple[str, int, str | None, datetime]]) -> int:
    """How many faults have, on the same card, a sample with a known correctable count above 0
    strictly before the fault: the most any correctable-ECC rule could ever predict."""
    if not faults:
        return 0
    row = db.fetchone(
        """WITH f AS (SELECT unnest($n::VARCHAR[]) AS node_id, unnest($i::INTEGER[]) AS gpu_index,
                             unnest($u::VARCHAR[]) AS gpu_uuid, unnest($at::TIMESTAMP[]) AS at)
        SELECT count(*) FROM f WHERE EXISTS (
            SELECT 1 FROM gpu_health_samples s
            WHERE s.source = $source AND s.node_id = f.node_id AND s.gpu_index = f.gpu_index
              AND s.gpu_uuid IS NOT DISTINCT FROM f.gpu_uuid AND s.sampled_at < f.at
              AND s.ecc_corrected_total > 0)""",
        {"n": [f[0] for f in faults], "i": [f[1] for f in faults], "u": [f[2] for f in faults],
         "at": [to_naive_utc(f[3]) for f in faults], "source": SOURCE_REAL},
    )
    return int(row[0])


def card_count(db: Database) -> int:
    return int(db.fetchone("SELECT count(*) FROM (SELECT DISTINCT node_id, gpu_index FROM "
                           "gpu_health_samples WHERE source = ?)", [SOURCE_REAL])[0])


@contextmanager
def only_version(db: Database, version: str) -> Iterator[None]:
    """Inside the block this thread's reads see the predictions of ``version`` only: the other
    versions' rows are deleted in a transaction that is always rolled back. The live statistics
    (:func:`evaluator.stats.prediction_stats`) count every version of a window length, because a
    live store runs one version at a time; a backtest file holds several side by side."""
    db.execute("BEGIN TRANSACTION")
    try:
        db.execute("DELETE FROM gpu_health_predictions WHERE rule_version <> ?", [version])
        yield
    finally:
        db.execute("ROLLBACK")
