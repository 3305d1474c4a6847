"""``python -m bench.scale --cards N [N ...] --days D``: fleets measured, not extrapolated.

Each fleet (5-minute rows of ``bench.rules``' profiles, generated inside DuckDB;
their 37-day story played in the fleet's days, so an 8-day fleet has its degrading cards,
faults and XID events too) is built and sealed as the live worker keeps it, then two FRESH
processes open the file:

- the project: one worker tick, one prediction-stats call and the capability matrix, with the
  process's peak resident memory (VmHWM);
- the reference: plain ``duckdb.connect`` on the same file and thread count running the minimal
  GROUP BY scans the same answers need at least: per card over the rules' baseline span (the
  tick's) and per card over the whole retention (the statistics' and the matrix's).

Printed per fleet: the times, the project / reference ratios, peak memory and bytes per
card-day; then the growth exponent between the two largest fleets, and a last line
``targets met`` or ``TARGET MISSED: <what>``. The machine is shared and noisy, so the ratios
(measured in the same run) decide; the absolute targets are for 100,000 cards.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

import duckdb

from gpu_health.clock import to_naive_utc

STORY_DAYS: Final = 37  # bench.rules' profiles: onsets up to day 32, faults from day 25
# The targets this bench checks.
TICK_RATIO: Final = 3.0  # project / reference, at 16,384 cards and up
STATS_RATIO: Final = 2.0
RATIO_FROM: Final = 16_384
FLEET: Final = 100_000  # the absolute targets hold here
TICK_S: Final = 10.0
STATS_S: Final = 2.0
CAPS_S: Final = 1.0
PEAK_MB: Final = 2048.0
EXPONENT: Final = 1.1  # between the two largest fleets
BYTES_PER_CARD_DAY: Final = 3000.0
BYTES_FROM: Final = RATIO_FROM  # the issue sets it at 100,000; smaller files carry fixed overhead

_TICK_REF: Final = """
SELECT node_id, gpu_index, count(ecc_corrected_total), min(ecc_corrected_total),
       max(ecc_corrected_total), max(ecc_uncorrected_total)
FROM gpu_health_samples WHERE sampled_at > $lo AND sampled_at <= $now GROUP BY ALL"""
_STATS_REF: Final = """
SELECT node_id, gpu_index, gpu_uuid, count(*), min(sampled_at), max(sampled_at),
       count(ecc_corrected_total), min(ecc_uncorrected_total), max(ecc_uncorrected_total)
FROM gpu_health_samples WHERE source = 'real' AND sampled_at <= $now GROUP BY ALL"""


def measure_reference(path: Path, now: datetime, baseline: timedelta,
                      threads: int = 2) -> dict[str, float]:
    """Run in a child process: the two reference scans on ``path`` with plain DuckDB."""
    con = duckdb.connect(str(path), read_only=True)
    con.execute(f"SET threads = {threads}")
    bounds = {"lo": to_naive_utc(now - baseline), "now": to_naive_utc(now)}
    started = time.perf_counter()
    con.execute(_TICK_REF, bounds).fetchall()
    tick_s = time.perf_counter() - started
    started = time.perf_counter()
    con.execute(_STATS_REF, {"now": bounds["now"]}).fetchall()
    stats_s = time.perf_counter() - started
    con.close()
    return {"ref_tick_s": tick_s, "ref_stats_s": stats_s}


def line(cards: int, days: int, r: dict[str, float]) -> str:
    return (f"{cards:>7,} cards x {days:>3} d: {r['rows']:>13,.0f} rows, "
            f"{r['per_card_day']:,.0f} B/card-day; tick {r['tick_s']:.2f} s "
            f"(reference {r['ref_tick_s']:.2f} s, x{r['tick_s'] / r['ref_tick_s']:.1f}), "
            f"stats {r['stats_s']:.2f} s (reference {r['ref_stats_s']:.2f} s, "
            f"x{r['stats_s'] / r['ref_stats_s']:.1f}), capabilities {r['caps_s']:.2f} s, peak "
            f"{r['peak_mb']:,.0f} MB, the hourly seal {r['seal_hour_s']:.2f} s; not timed: "
            f"generate {r['generate_s']:.0f} s, summarise {r['seal_s']:.0f} s")


def misses(results: dict[int, dict[str, float]], growth: dict[str, float] | None) -> list[str]:
    """What missed its target (empty: every target met)."""
    out: list[str] = []
    for cards, r in sorted(results.items()):
        if cards >= RATIO_FROM and r["tick_s"] > TICK_RATIO * r["ref_tick_s"]:
            out.append(f"tick x{r['tick_s'] / r['ref_tick_s']:.1f} at {cards:,} (<= {TICK_RATIO})")
        if cards >= RATIO_FROM and r["stats_s"] > STATS_RATIO * r["ref_stats_s"]:
            out.append(f"stats x{r['stats_s'] / r['ref_stats_s']:.1f} at {cards:,} "
                       f"(<= {STATS_RATIO})")
        if cards >= BYTES_FROM and r["per_card_day"] > BYTES_PER_CARD_DAY:
            out.append(f"{r['per_card_day']:,.0f} B/card-day at {cards:,}")
        if cards >= FLEET:
            for key, limit, unit in (("tick_s", TICK_S, "s"), ("stats_s", STATS_S, "s"),
                                     ("caps_s", CAPS_S, "s"), ("peak_mb", PEAK_MB, "MB")):
                if r[key] > limit:
                    out.append(f"{key.removesuffix('_s')} {r[key]:,.2f} {unit} at {cards:,} "
                               f"(<= {limit:g})")
    for key, value in (growth or {}).items():
        if value > EXPONENT:
            out.append(f"{key} growth exponent {value:.2f} (<= {EXPONENT})")
    if max(results, default=0) < FLEET:
        out.append(f"no fleet of {FLEET:,} cards measured")
    return out
