"""Hour-by-hour correctable counts of a few cards, for a rule that caps its growth windows'
busiest hours (``cap_busiest_hours``, :func:`gpu_health.evaluator.rules.signals.capped_increases`).

A card's value at ``t0 - j`` hours (j = 0..k*g) is read as every boundary value is
(:mod:`gpu_health.evaluator.store.predictions.features`): the last non-NULL correctable count of a
sample with the same UUID in ``[b - boundary_max_age, b]``, else unknown (None). So ``hourly[i*g]``
is ``corrected[i]``.

Only the cards whose last growth window can pass the magnitude gate are read (capping never
raises an increase): a tick or a replay chunk asks for all of them in one statement, which reads
those cards' rows over ``[min(t0) - k*g - max_age, max(t0)]`` only.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Final

from gpu_health.clock import epoch_us
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.rules.signals import last_increase, reaches_min_increase
from gpu_health.evaluator.store.db import Database

# (node_id, gpu_index, gpu_uuid, t0 aware UTC)
Head = tuple[str, int, str | None, datetime]

_ROWS: Final = """
WITH sel AS (SELECT unnest($nodes::VARCHAR[]) AS node_id, unnest($idx::INTEGER[]) AS gpu_index)
SELECT s.node_id, s.gpu_index, coalesce(s.gpu_uuid, '') AS ukey, epoch_us(s.sampled_at),
       s.ecc_corrected_total
FROM gpu_health_samples s
WHERE s.source = $source AND s.ecc_corrected_total IS NOT NULL
  AND s.sampled_at >= $lo AND s.sampled_at <= $hi
  AND EXISTS (SELECT 1 FROM sel c WHERE c.node_id = s.node_id AND c.gpu_index = s.gpu_index)
ORDER BY s.node_id, s.gpu_index, ukey, s.sampled_at
"""
_HOUR_US: Final = 3_600_000_000


def hours_needed(params: RuleParams) -> int:
    """How many hours back a capped growth gate reads: all its windows."""
    return params.consecutive_windows * params.growth_window_hours


def wants_hourly(corrected: Sequence[int | None], params: RuleParams) -> bool:
    """Whether the growth gate of ``params`` may need this card's hourly values: it caps, and
    the last window's known increase reaches ``min_increase``."""
    if not params.cap_busiest_hours or len(corrected) < 2:
        return False
    return reaches_min_increase(last_increase(corrected[0], corrected[1]), params)


def hourly_values(db: Database, source: str, heads: Sequence[Head], hours: int,
                  max_age: timedelta) -> list[tuple[int | None, ...]]:
    """Per head, the correctable count at ``t0 - j`` hours for j in 0..hours (one statement)."""
    if not heads:
        return []
    cards = sorted({(h[0], h[1]) for h in heads})
    t0s = [h[3] for h in heads]
    rows = db.fetchall(_ROWS, {
        "nodes": [c[0] for c in cards], "idx": [c[1] for c in cards], "source": source,
        "lo": min(t0s) - timedelta(hours=hours) - max_age, "hi": max(t0s)})
    # Times as integer microseconds: a replay reads tens of thousands of heads, and datetime
    # arithmetic per hourly boundary was most of its cost.
    series: dict[tuple[str, int, str], tuple[list[int], list[int]]] = {}
    for node, gpu, ukey, at_us, value in rows:
        times, values = series.setdefault((str(node), int(gpu), str(ukey)), ([], []))
        times.append(int(at_us))
        values.append(int(value))
    age = max_age // timedelta(microseconds=1)
    return [_read(series.get((h[0], h[1], h[2] or "")), epoch_us(h[3]), hours, age)
            for h in heads]


def _read(series: tuple[list[int], list[int]] | None, t0: int, hours: int,
          age: int) -> tuple[int | None, ...]:
    """The value at each hourly boundary, newest first: the boundaries fall back in time, so
    each bisection searches only left of the previous one."""
    if series is None:
        return (None,) * (hours + 1)
    times, values = series
    out: list[int | None] = []
    hi = len(times)
    for j in range(hours + 1):
        b = t0 - j * _HOUR_US
        hi = bisect_right(times, b, 0, hi)
        out.append(values[hi - 1] if hi and times[hi - 1] >= b - age else None)
    return tuple(out)


def with_hourly(db: Database, features: Sequence[CardFeatures],
                params: RuleParams) -> list[CardFeatures]:
    """``features``, those :func:`wants_hourly` picks with their hourly values (one statement
    per source)."""
    out = list(features)
    picked = [i for i, f in enumerate(out) if wants_hourly(f.corrected, params)]
    for source in sorted({out[i].source for i in picked}):
        mine = [i for i in picked if out[i].source == source]
        heads = [(out[i].node_id, out[i].gpu_index, out[i].gpu_uuid, out[i].t0) for i in mine]
        for i, values in zip(mine, hourly_values(db, source, heads, hours_needed(params),
                                                 params.boundary_max_age), strict=True):
            out[i] = replace(out[i], hourly=values)
    return out
