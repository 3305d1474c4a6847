"""DuckDB's dialect: its text where the shared statements cannot agree with PostgreSQL's
(:class:`gpu_health.evaluator.store.sql.Dialect`). The shared statements are DuckDB SQL already, so
this holds only the places where PostgreSQL's equivalent is a different plan, not a spelling (pure).
"""

from __future__ import annotations

from typing import Final

from gpu_health.evaluator.store.sql import Dialect

# The rows next to each boundary: every card's rows of the slices around the boundaries
# (``near``, one scan per slice), joined on time buckets. DuckDB scans and hash-joins ``near``
# in a tenth of the time PostgreSQL needs to materialise and sort it (bench.postgres, 4,096
# cards), so PostgreSQL probes an index per card and boundary instead.
_BOUNDARIES: Final = """near AS MATERIALIZED (
{slices}
),
probes AS MATERIALIZED (
    -- [b - max_age, b] spans at most two buckets of width max_age: join on each (an equi-join,
    -- so a row only meets the few boundaries next to it), then keep rows inside the range.
    -- MATERIALIZED: PostgreSQL would otherwise flatten this into the join below and, without
    -- statistics on the CTEs, test the bucket after a merge join on the card alone (measured
    -- 0.45 s of 1.9 s at 1,024 cards; DuckDB plans the same either way).
    SELECT *, (epoch_us(b) // $bucket_us) - d AS bucket
    FROM points CROSS JOIN (VALUES (0), (1)) AS shift(d)
),
vals AS (
    SELECT p.ev, p.node_id, p.gpu_index, p.j,
           {values}
    FROM probes p
    JOIN near s
      ON s.node_id = p.node_id AND s.gpu_index = p.gpu_index AND s.ukey = p.ukey
     AND s.bucket = p.bucket
     AND s.sampled_at <= p.b AND s.sampled_at >= p.b - to_seconds($max_age)
    GROUP BY p.ev, p.node_id, p.gpu_index, p.j
),
partial AS (
    -- rows in [trunc(x), x] for x = t0 (added) and x = t0 - B (already in whole, subtracted)
    SELECT p.ev, p.node_id, p.gpu_index, p.j, count(*) AS n
    FROM (SELECT *, date_trunc('hour', b) AS hb FROM points WHERE j IN (0, {base_j})) p
    JOIN (SELECT *, date_trunc('hour', sampled_at) AS hs FROM near
          WHERE ecc_corrected_total IS NOT NULL) s
      ON s.node_id = p.node_id AND s.gpu_index = p.gpu_index AND s.ukey = p.ukey
     AND s.hs = p.hb AND s.sampled_at <= p.b
    GROUP BY p.ev, p.node_id, p.gpu_index, p.j
),"""

# Each (time, card)'s newest row at or before the time: DuckDB's ASOF JOIN sorts both sides
# once (PostgreSQL has no ASOF JOIN).
_ASOF: Final = """ASOF JOIN recent r
      ON r.node_id = ca.node_id AND r.gpu_index = ca.gpu_index AND ca.ev >= r.sampled_at"""

DIALECT: Final = Dialect(
    feature_boundaries=_BOUNDARIES,
    feature_asof=_ASOF,
    # One feature statement (feature_shards = 1): DuckDB runs it on all its threads.
    feature_shard=None,
    # generate_series is a list function in DuckDB: unnested into rows.
    run_times="unnest(generate_series(first_at, last_at, to_microseconds({step_us})))",
    # Read once, used twice.
    facts_days="MATERIALIZED",
)
