"""Benchmark: one worker tick (backfill + predict) and prediction_stats over a large store.

Generates 4,096 cards x 37 days of 5-minute samples (about 43.6 M rows, the keep-alive upper
bound of 288 rows per card per day) INSIDE DuckDB with ``INSERT ... SELECT FROM range(...)``,
one day per statement in time order (as ingest appends them), into a store opened through
``Database`` (the live schema), then sealed into daily rollups as the live worker keeps them.
Profiles: most cards flat, some growing linearly, some degrading quadratically (about half of
those later show uncorrectable errors), one-off bursts, Kunlunxin-like cards with only an
uncorrectable count, and card swaps. A few hundred pending predictions (7- and 30-day windows,
some matured) are planted before the timed tick. XID rows (``gpu_health_xid_samples``, change-
only as ingest writes them): the five memory XIDs at 0 from the start on every NVIDIA-like card,
memory XIDs on the failing degrading cards and on some otherwise healthy cards (followed by an
exporter restart), and daily XID 13 noise on a tenth of the cards. The rule set is the default
(v2-ecc-xid), so backfill and recall both scan the XID events.

Targets: tick < 10 s, prediction-stats < 2 s. Generation and the one-off summary are not
timed (printed).

    python -m bench.rules            # full run (~43 M rows; needs a few GB of disk and RAM)
    python -m bench.rules --quick    # 256 cards x 10 days, seconds
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpu_health.clock import to_naive_utc
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.stats.document import prediction_stats
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.predictions.window_edges import refresh_edges
from gpu_health.evaluator.store.readings.rollups import seal
from gpu_health.evaluator.worker import Worker

STEP_S = 300
END = datetime(2026, 3, 1, tzinfo=UTC)

# Node of card c (8 GPUs a node): lpad truncates a longer string to its length on both engines
# (DuckDB and PostgreSQL), so the width grows with the number: node-12499 stays itself.
NODE_OF_C = ("'node-' || lpad((c // 8)::VARCHAR, "
             "greatest(4, length((c // 8)::VARCHAR))::INTEGER, '0')")

# Profile of card c by h = (c * 7919) % 1000; t is days since the start of the data.
_PROFILE = """
    CASE WHEN h < 60 THEN 'degrading' WHEN h < 70 THEN 'burst' WHEN h < 110 THEN 'kunlun'
         WHEN h < 300 THEN 'linear' WHEN h < 306 THEN 'swap' ELSE 'flat' END
"""
_ROWS = f"""
INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, sampled_at,
                                ecc_uncorrected_total, ecc_corrected_total, retired_pages,
                                remapped_rows_pending, remapped_rows_failure)
SELECT {NODE_OF_C}, (c % 8)::INTEGER,
       CASE WHEN kind = 'swap' AND t >= 10 + c % 20 THEN 'GPU-' || c || '-b'
            ELSE 'GPU-' || c END,
       'real', $start + to_seconds(i * {STEP_S}),
       CASE WHEN kind = 'degrading' AND h < 30 AND t >= onset + 17 + c % 4
                THEN 1 + floor(t - onset - 17 - c % 4)::BIGINT
            WHEN kind = 'burst' AND h < 65 AND t >= 6 + c % 25 THEN 1
            WHEN kind = 'kunlun' AND h < 75 AND t >= 20 + c % 10 THEN 2
            ELSE 0 END,
       CASE WHEN kind = 'kunlun' THEN NULL
            WHEN kind = 'degrading'
                THEN c % 13 + floor((2 + c % 4) * pow(greatest(t - onset, 0), 2))::BIGINT
            WHEN kind = 'burst' THEN c % 13 + CASE WHEN t >= 5 + c % 25 THEN 500 ELSE 0 END
            WHEN kind = 'linear' THEN c % 13 + floor(t * (1 + c % 10))::BIGINT
            WHEN kind = 'swap' AND t >= 10 + c % 20 THEN floor(t - 10 - c % 20)::BIGINT
            ELSE c % 13 END,
       CASE WHEN kind = 'kunlun' OR c % 2 = 0 THEN NULL ELSE 3 END,
       CASE WHEN kind = 'kunlun' OR c % 2 = 1 THEN NULL ELSE 0 END,
       CASE WHEN kind = 'kunlun' OR c % 2 = 1 THEN NULL ELSE 0 END
FROM (
    SELECT c, i, i * {STEP_S} / 86400.0 / $pace AS t, h, {_PROFILE} AS kind, 8 + c % 25 AS onset
    FROM (SELECT range AS i FROM range($i0, $i1)) steps
    CROSS JOIN (SELECT range AS c, (range * 7919) % 1000 AS h FROM range($cards)) cards
)
ORDER BY i, c
"""


_XIDS = f"""
INSERT INTO gpu_health_xid_samples
SELECT {NODE_OF_C}, (c % 8)::INTEGER, 'GPU-' || c, 'real', xid,
       $start + to_seconds((round(t * $pace * 86400 / {STEP_S}) * {STEP_S})::BIGINT), n
FROM (
    SELECT c, h, {_PROFILE} AS kind, 8 + c % 25 AS onset
    FROM (SELECT range AS c, (range * 7919) % 1000 AS h FROM range($cards))
) cards,
LATERAL (
    -- the five memory XIDs exported at 0 from the exporter's start
    SELECT x AS xid, 0.0 AS t, 0 AS n FROM (VALUES (48), (63), (64), (94), (95)) v(x)
    WHERE kind <> 'kunlun'
    UNION ALL  -- failing degrading cards: XID 94 with the uncorrectable error, then 63
    SELECT x, onset + 17 + c % 4 + d, 1 FROM (VALUES (94, 0.01), (63, 0.05)) v(x, d)
    WHERE kind = 'degrading' AND h < 30
    UNION ALL  -- XID-only faults on flat cards: 48 at day 15 + c % 10, restart 2 days later
    SELECT 48, 15 + c % 10 + d, n FROM (VALUES (0.0, 1), (2.0, 0)) v(d, n)
    WHERE kind = 'flat' AND h BETWEEN 306 AND 330
    UNION ALL  -- application XID 13 noise, one more line a day
    SELECT 13, d, d FROM range(1, $story) r(d) WHERE kind = 'flat' AND h BETWEEN 400 AND 500
)
WHERE t < $story
"""


_ROWS_PER_STATEMENT = 4_000_000


def generate(db: Database, cards: int, days: int, end: datetime,
             story_days: int | None = None) -> tuple[int, int]:
    """Insert ``cards`` x ``days`` of 5-minute samples ending at ``end`` and the XID rows;
    returns the two row counts. ``story_days``: the profiles' days played in ``days`` (37 in
    8: onsets, faults and XIDs come 37/8 times sooner, so a short fleet has faults too; None:
    one profile day per day)."""
    story = story_days or days
    pace = {"pace": days / story, "story": story}
    start = to_naive_utc(end - timedelta(days=days))
    steps = days * 86400 // STEP_S
    # At most a day and about 4 M rows per statement (its sort stays in memory; 100,000 cards
    # are 28.8 M rows a day), in time order as ingest appends them.
    per_statement = max(1, min(86400 // STEP_S, _ROWS_PER_STATEMENT // cards))
    for i0 in range(0, steps, per_statement):
        db.execute(_ROWS, {"start": start, "i0": i0, "i1": min(i0 + per_statement, steps),
                           "cards": cards, "pace": pace["pace"]})
    db.execute(_XIDS, {"start": start, "cards": cards} | pace)
    return (int(db.fetchone("SELECT count(*) FROM gpu_health_samples")[0]),
            int(db.fetchone("SELECT count(*) FROM gpu_health_xid_samples")[0]))


def plant_predictions(db: Database, version: str, cards: int, now: datetime,
                      count: int = 400) -> int:
    """``count`` pending predictions of the rule's version, t0 1 to 35 days back (so some
    windows matured), two thirds with a 7-day window and one third with 30 days."""
    db.execute(
        f"""
        INSERT INTO gpu_health_predictions
        SELECT 'planted-' || k, {NODE_OF_C}, (c % 8)::INTEGER,
               'GPU-' || c, 'real', $version, w, t0, t0 + to_days(w), t0, 'ecc_corrected_growth',
               'trend', 'planted by bench/rules.py', 0, 'pending', NULL, NULL, false
        FROM (SELECT k, (k * 37) % $cards AS c, CASE WHEN k % 3 = 0 THEN 30 ELSE 7 END AS w,
                     $now - to_days(1 + k % 35) - to_minutes(7) AS t0
              FROM range($count) r(k))
        """,
        {"version": version, "cards": cards, "now": to_naive_utc(now), "count": count},
    )
    return count


def summarise(db: Database, now: datetime) -> tuple[float, float]:
    """Seal every complete day and summarise the pending windows' edges, as the first tick
    after the upgrade does once (the migration); returns the two durations."""
    started = time.perf_counter()
    seal(db, now)
    sealed_s = time.perf_counter() - started
    started = time.perf_counter()
    refresh_edges(db, now)
    return sealed_s, time.perf_counter() - started


def measure(db: Database, rows: int, cards: int) -> bool:
    """Plant pending predictions, then time one tick and one prediction_stats call."""
    ruleset = load_ruleset(env={})
    now = END - timedelta(minutes=1)
    planted = plant_predictions(db, ruleset.version, cards, now)
    worker = Worker(db, ruleset, clock=lambda: now)
    worker.register(now)
    started = time.perf_counter()
    refresh_edges(db, now)
    print(f"edges of {planted} pending windows summarised in {time.perf_counter() - started:.1f} s "
          "(once, as the first tick after an upgrade; not timed below)")

    started = time.perf_counter()
    report = worker.tick(now)
    tick_s = time.perf_counter() - started
    print(f"rule set {ruleset.version}")
    print(f"tick (backfill + predict): {tick_s:.2f} s (target < 10 s), "
          f"{rows / tick_s:,.0f} stored rows/s; {planted} planted pending, resolved "
          f"{report.resolved}, evaluated {report.evaluated}, "
          f"new predictions {len(report.predictions)}")

    started = time.perf_counter()
    stats = prediction_stats(db, now=now, ruleset=ruleset)
    stats_s = time.perf_counter() - started
    w7 = stats["windows"][0]
    print(f"prediction_stats: {stats_s:.2f} s (target < 2 s), {rows / stats_s:,.0f} stored rows/s; "
          f"fault events {','.join(w7['fault_events'])}; "
          f"7d: {w7['predictions']}, faulty {w7['faulty_cards']}, "
          f"predicted {w7['predicted_faulty_cards']}, monitorable {w7['monitorable_cards']}, "
          f"exposure {w7['exposure_card_days']:,.0f} card-days")
    return tick_s < 10 and stats_s < 2


def run_on_fleet(argv: list[str] | None, description: str | None,
                 measure: Callable[[Database, int, int], bool]) -> int:
    """The command line shared by the benchmarks on this store: generate the fleet (not
    timed), then ``measure(db, rows, cards)``; exit 0 when it says the targets were met."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="256 cards x 10 days")
    parser.add_argument("--cards", type=int, default=4096)
    parser.add_argument("--days", type=int, default=37)
    parser.add_argument("--db", type=Path, help="DuckDB file (default: a temporary one)")
    args = parser.parse_args(argv)
    cards, days = (256, 10) if args.quick else (args.cards, args.days)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="gpu-health-bench-") as tmp:
        path = args.db or Path(tmp) / "bench.duckdb"
        if path.exists():
            path.unlink()
        db = DuckDBDatabase(path)
        started = time.perf_counter()
        rows, xid_rows = generate(db, cards, days, END)
        print(f"generated {rows:,} rows ({cards} cards x {days} days of 5-minute samples) and "
              f"{xid_rows:,} XID rows in {time.perf_counter() - started:.1f} s (not timed)")
        started = time.perf_counter()
        seal(db, END)  # the layout the live worker keeps: every complete day summarised
        print(f"summarised {days} days in {time.perf_counter() - started:.1f} s (not timed)")
        ok = measure(db, rows, cards)
        db.close()
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    return run_on_fleet(argv, __doc__.splitlines()[0] if __doc__ else None, measure)


if __name__ == "__main__":
    sys.exit(main())
