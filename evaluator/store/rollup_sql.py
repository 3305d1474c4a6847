"""SQL of the per-card daily rollups (see :mod:`gpu_health.evaluator.store.readings.rollups` for
when they are used).

A *segment* summarises the rows of one series (source, node, index, UUID) over one stretch of
time that no other segment of the series overlaps: a sealed day (``gpu_health_sample_days``), the
part of a day a query reads from the raw rows, or the head of a prediction's window
(``gpu_health_window_edges``). Every segment has the same fields, all mergeable:

- ``n_rows``, ``first_at``, ``last_at``; ``n_<counter>`` rows with a known value per counter;
- uncorrectable count: ``unc_min``/``unc_max``, the first and last known value with their times,
  ``inc_at``/``inc_before``/``inc_after`` (the first row whose known count is above the previous
  known count of the same series *inside the segment*), ``pos_at`` (first known count > 0);
- sealed days only: ``corr_hours``, rows with a known correctable count per hour of the day.

An increase point over several segments is either a segment's own ``inc_at`` or a segment's first
known count above the previous segment's last known count (:data:`FIRST_INCREASE`): exactly the
points a ``lag()`` over the raw rows finds, without reading them again.
"""

from __future__ import annotations

from typing import Final

from gpu_health.contract import COUNTER_KEYS

DAYS: Final = "gpu_health_sample_days"
EDGES: Final = "gpu_health_window_edges"
STATE: Final = "gpu_health_rollup_state"
SEALED_MEMO: Final = "rollups.sealed_until"  # the watermark, read once per process (Database.memo)

_UNC: Final = "ecc_uncorrected_total"
SERIES: Final = "source, node_id, gpu_index, gpu_uuid"

# Segment fields shared by days and leads, in table order (after the key columns).
FIELDS: Final = (
    "n_rows", "first_at", "last_at", *(f"n_{k}" for k in COUNTER_KEYS),
    "unc_min", "unc_max", "unc_first_at", "unc_first", "unc_last_at", "unc_last",
    "inc_at", "inc_before", "inc_after", "pos_at",
)
_FIELD_TYPES: Final = (
    "BIGINT NOT NULL", "TIMESTAMP", "TIMESTAMP", *("BIGINT NOT NULL" for _ in COUNTER_KEYS),
    "BIGINT", "BIGINT", "TIMESTAMP", "BIGINT", "TIMESTAMP", "BIGINT",
    "TIMESTAMP", "BIGINT", "BIGINT", "TIMESTAMP",
)
FIELD_COLUMNS: Final = ",\n    ".join(
    f"{name} {kind}" for name, kind in zip(FIELDS, _FIELD_TYPES, strict=True))
FIELD_LIST: Final = ", ".join(FIELDS)


def prev_unc(partition: str) -> str:
    """The previous known uncorrectable count of the row's partition (NULL for unknown rows)."""
    return (f"CASE WHEN {_UNC} IS NOT NULL THEN lag({_UNC}) OVER (PARTITION BY {partition}, "
            f"{_UNC} IS NULL ORDER BY sampled_at) END")


# prev_unc over the raw rows of one series and UTC day (sealed days and raw remainders).
_DAY_PREV: Final = prev_unc(SERIES + ", date_trunc('day', sampled_at)")

# The segment aggregate over rows exposing the samples' columns and ``prev`` (prev_unc).
AGGREGATE: Final = ",\n       ".join((
    "count(*) AS n_rows", "min(sampled_at) AS first_at", "max(sampled_at) AS last_at",
    *(f"count({k}) AS n_{k}" for k in COUNTER_KEYS),
    f"min({_UNC}) AS unc_min", f"max({_UNC}) AS unc_max",
    f"min(sampled_at) FILTER (WHERE {_UNC} IS NOT NULL) AS unc_first_at",
    f"arg_min({_UNC}, sampled_at) AS unc_first",
    f"max(sampled_at) FILTER (WHERE {_UNC} IS NOT NULL) AS unc_last_at",
    f"arg_max({_UNC}, sampled_at) AS unc_last",
    f"min(sampled_at) FILTER (WHERE {_UNC} > prev) AS inc_at",
    f"arg_min(prev, sampled_at) FILTER (WHERE {_UNC} > prev) AS inc_before",
    f"arg_min({_UNC}, sampled_at) FILTER (WHERE {_UNC} > prev) AS inc_after",
    f"min(sampled_at) FILTER (WHERE {_UNC} > 0) AS pos_at",
))
CORR_HOURS: Final = "list_value(" + ", ".join(
    f"count(ecc_corrected_total) FILTER (WHERE hour(sampled_at) = {h})" for h in range(24)
) + ") AS corr_hours"

def day_segments(part: str = "", cards: str = "") -> str:
    """Raw rows in [$lo, $hi) summarised per series and day (the sealing statement's body);
    ``part``: an optional extra condition, ``cards``: an optional EXISTS condition restricting
    the series."""
    return f"""
SELECT {SERIES}, day, {AGGREGATE}, {CORR_HOURS}
FROM (
    SELECT *, date_trunc('day', sampled_at) AS day,
           {_DAY_PREV} AS prev
    FROM gpu_health_samples s
    WHERE sampled_at >= $lo AND sampled_at < $hi{part}{cards}
) AS d
GROUP BY {SERIES}, day"""

def period_segments(nodes: str = "", cards: str = "") -> str:
    """Segments of every series of $source in the period [$since, $until]: the sealed days
    inside it ([$dlo, $dhi), :func:`period_days`), and the raw rows of the rest ([$since, $dlo)
    and [$dhi, $until]) per day (:func:`period_raw`). ``nodes``: an optional node filter;
    ``cards``: an optional EXISTS test of the series (alias g) in a relation ``cand`` (node_id,
    gpu_index, gpu_uuid), applied before the raw rows' window pass."""
    return f"{period_days(nodes, cards)}\n    UNION ALL{period_raw(nodes, cards)}"


def period_days(nodes: str = "", cards: str = "") -> str:
    """The sealed days of :func:`period_segments`."""
    return f"""
    SELECT {SERIES}, {FIELD_LIST} FROM {DAYS} g
    WHERE source = $source AND day >= $dlo AND day < $dhi{nodes}{cards}"""


def period_raw(nodes: str = "", cards: str = "") -> str:
    """The raw rows of :func:`period_segments`, one segment per series and day. Their
    increase fields take a window pass over the rows; a reader that needs none of them (and
    ``cards`` restricts the rows before it) does not pay for it: both engines drop the unused
    window."""
    return f"""
    SELECT {SERIES}, {AGGREGATE} FROM (
        SELECT g.*, {_DAY_PREV} AS prev
        FROM gpu_health_samples g
        WHERE source = $source AND sampled_at >= $since AND sampled_at <= $until
          AND NOT (sampled_at >= $dlo AND sampled_at < $dhi){nodes}{cards}) AS r
    GROUP BY {SERIES}, date_trunc('day', sampled_at)"""


CAND: Final = (" AND EXISTS (SELECT 1 FROM cand c WHERE c.node_id = g.node_id"
               " AND c.gpu_index = g.gpu_index AND c.gpu_uuid IS NOT DISTINCT FROM g.gpu_uuid)")

# Over a relation {segs} (key columns {key}, segment fields): per key, the first increase point
# of the known uncorrectable counts, with the counts before and after it (holes filled by
# gpu_health.evaluator.store.sql.fill_statement).
FIRST_INCREASE: Final = """
    SELECT {key}, min(event_at) AS event_at, arg_min(before, event_at) AS before,
           arg_min(after, event_at) AS after
    FROM (
        SELECT {key}, inc_at AS event_at, inc_before AS before, inc_after AS after
        FROM {segs} WHERE inc_at IS NOT NULL
        UNION ALL
        SELECT {key}, unc_first_at, prev_last, unc_first FROM (
            SELECT {key}, unc_first_at, unc_first,
                   lag(unc_last) OVER (PARTITION BY {key} ORDER BY unc_first_at) AS prev_last
            FROM {segs} WHERE unc_first_at IS NOT NULL) AS l
        WHERE unc_first > prev_last
    ) AS e
    GROUP BY {key}"""


def _first_event(field: str, cross: str) -> str:
    """A segment's first increase point given the previous segment's last known count
    (``prev_last``): its first known count when above that, else its own increase point."""
    return f"CASE WHEN unc_first > prev_last THEN {cross} ELSE {field} END"


# The segments of the day $day already sealed (before $lo) and the raw rows in [$lo, $hi) of the
# same day, merged into one segment per series (an hourly seal, rollups._seal_part). Segments are
# disjoint in time, so: counts add, bounds take min/max, first/last values come from the first/
# last segment holding one, and the first increase point is the earliest of each segment's
# (:data:`FIRST_INCREASE` over two or more segments).
def merge_day(part: str = "") -> str:
    """The merged segments of $day (see above); ``part``: an optional node condition (s)."""
    return f"""
SELECT {SERIES}, day, sum(n_rows)::BIGINT AS n_rows, min(first_at) AS first_at,
       max(last_at) AS last_at,
       {", ".join(f"sum(n_{k})::BIGINT AS n_{k}" for k in COUNTER_KEYS)},
       min(unc_min) AS unc_min, max(unc_max) AS unc_max, min(unc_first_at) AS unc_first_at,
       arg_min(unc_first, unc_first_at) AS unc_first, max(unc_last_at) AS unc_last_at,
       arg_max(unc_last, unc_last_at) AS unc_last, min(ev_at) AS inc_at,
       arg_min(ev_before, ev_at) AS inc_before, arg_min(ev_after, ev_at) AS inc_after,
       min(pos_at) AS pos_at,
       list_value({", ".join(f"sum(corr_hours[{h}])::BIGINT" for h in range(1, 25))})
           AS corr_hours
FROM (
    SELECT *, {_first_event("inc_at", "unc_first_at")} AS ev_at,
           {_first_event("inc_before", "prev_last")} AS ev_before,
           {_first_event("inc_after", "unc_first")} AS ev_after
    FROM (
        -- NULLs sort last in both engines: a segment with no known count is nobody's previous
        SELECT *, lag(unc_last) OVER (PARTITION BY {SERIES} ORDER BY unc_first_at) AS prev_last
        FROM (
            SELECT {SERIES}, day, {FIELD_LIST}, corr_hours FROM {DAYS} s
            WHERE day = $day{part}
            UNION ALL
            {day_segments(part=part).strip()}
        ) AS u
    ) AS l
) AS e
GROUP BY {SERIES}, day"""
