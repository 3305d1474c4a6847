"""The feature-extraction statement (see :mod:`gpu_health.evaluator.store.predictions.features` for
the semantics).

Built per parameter set, number of scan slices and engine (its
:class:`~gpu_health.evaluator.store.sql.Dialect` supplies the boundary probes and the as-of join);
every value is a bound parameter. A NULL UUID is keyed as '' for the join equalities (Prometheus
itself treats an empty label value as an absent label, so no card reports '' as its UUID).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.store.sql import Dialect, fill_statement

# alias -> counter column
_NEEDED: Final[dict[str, str]] = {
    "corr": "ecc_corrected_total",
    "unc": "ecc_uncorrected_total",
    "fail": "remapped_rows_failure",
    "pend": "remapped_rows_pending",
    "ret": "retired_pages",
}
# alias -> column of the weak layer, read only for a rule that reads it (RuleParams.reads_weak)
_WEAK: Final[dict[str, str]] = {
    "hwt": "hw_thermal_slowdown_us",
    "swt": "sw_thermal_slowdown_us",
    "lw": "pcie_link_width",
    "lwm": "pcie_link_width_max",
    "rep": "pcie_replays",
    "nvl": "nvlink_errors",
}
# after the others: thermal slowdown at t0 and t0 - g, the link at t0, replays and NVLink errors
# at t0 and t0 - g
WEAK_PIVOTS: Final = ("hwt_0", "hwt_1", "swt_0", "swt_1", "lw_0", "lwm_0", "rep_0", "rep_1",
                      "nvl_0", "nvl_1")


def _needed(params: RuleParams) -> dict[str, str]:
    return _NEEDED | _WEAK if params.reads_weak else _NEEDED


def offsets(params: RuleParams) -> list[int]:
    """Boundary offsets in seconds: j = 0..k are the growth windows, j = k + 1 the baseline."""
    g = params.growth_window_hours * 3600
    return [j * g for j in range(params.consecutive_windows + 1)] + [params.baseline_days * 86400]


_SLICE: Final = """    SELECT node_id, gpu_index, coalesce(gpu_uuid, '') AS ukey, sampled_at,
           epoch_us(sampled_at) // $bucket_us AS bucket, {columns}
    FROM gpu_health_samples s
    WHERE source = $source AND sampled_at >= $s{i} AND sampled_at <= $e{i}{cards}"""

_TEMPLATE: Final = """
WITH ats AS (SELECT DISTINCT unnest($ats::TIMESTAMP[]) AS ev),{cards_cte}
recent AS (
    SELECT node_id, gpu_index, gpu_uuid, sampled_at FROM gpu_health_samples s
    WHERE source = $source AND sampled_at >= $lo - to_seconds($max_age) AND sampled_at <= $hi{cards}
),
heads AS (
    SELECT ca.ev, ca.node_id, ca.gpu_index, r.sampled_at AS t0, r.gpu_uuid,
           coalesce(r.gpu_uuid, '') AS ukey
    FROM (SELECT a.ev, c.node_id, c.gpu_index
          FROM ats a CROSS JOIN (SELECT DISTINCT node_id, gpu_index FROM recent) c) ca
    {asof}
    WHERE r.sampled_at >= ca.ev - to_seconds($max_age)
),
points AS (
    SELECT h.ev, h.node_id, h.gpu_index, h.ukey, o.j, h.t0 - to_seconds(o.off) AS b
    FROM heads h
    CROSS JOIN (SELECT unnest($offs::BIGINT[]) AS off, unnest($js::INTEGER[]) AS j) o
),
{boundaries}
pivoted AS (
    SELECT ev, node_id, gpu_index,
           {pivots}
    FROM vals GROUP BY ev, node_id, gpu_index
),
raw_hours AS (
    -- after the sealed days: rows with a known correctable count per card, UUID and hour
    SELECT node_id, gpu_index, coalesce(gpu_uuid, '') AS ukey,
           date_trunc('hour', sampled_at) AS h, count(*) AS n
    FROM gpu_health_samples s
    WHERE source = $source AND ecc_corrected_total IS NOT NULL
      AND sampled_at >= $raw_lo AND sampled_at <= $hi{cards}
    GROUP BY node_id, gpu_index, coalesce(gpu_uuid, ''), date_trunc('hour', sampled_at)
),
span AS (
    SELECT ev, node_id, gpu_index, ukey, date_trunc('hour', t0 - to_seconds($baseline)) AS h1,
           date_trunc('hour', t0) AS h2
    FROM heads
),
whole AS (
    -- rows in the hours [trunc(t0 - B), trunc(t0)): every such row lies before t0. A sealed
    -- day adds its hourly counts of those hours, the raw rows after the sealed days their own.
    SELECT ev, node_id, gpu_index, sum(n) AS n FROM (
        SELECT b.ev, b.node_id, b.gpu_index,
               -- a day inside the span counts all its rows (a function call per day cost
               -- PostgreSQL 5 us: 0.16 s for 32,768 days at 4,096 cards)
               CASE WHEN d.day >= b.h1 AND d.day + INTERVAL '1 day' <= b.h2
                    THEN d.n_ecc_corrected_total
                    ELSE list_sum(list_slice(d.corr_hours,
                                             greatest(0, datediff('hour', d.day, b.h1)) + 1,
                                             least(24, datediff('hour', d.day, b.h2)))) END AS n
        FROM span b JOIN gpu_health_sample_days d
          ON d.node_id = b.node_id AND d.gpu_index = b.gpu_index
         AND coalesce(d.gpu_uuid, '') = b.ukey
         AND d.day >= date_trunc('day', b.h1) AND d.day < b.h2
        WHERE d.source = $source AND d.day >= $day_lo AND d.day < $sealed AND d.day <= $hi
        UNION ALL
        SELECT b.ev, b.node_id, b.gpu_index, r.n
        FROM span b JOIN raw_hours r
          ON r.node_id = b.node_id AND r.gpu_index = b.gpu_index AND r.ukey = b.ukey
         AND r.h >= b.h1 AND r.h < b.h2) AS u
    GROUP BY ev, node_id, gpu_index
)
-- One row per (time, card) from its parts: a GROUP BY over their union instead of four joins
-- on the key (PostgreSQL, with no statistics on these CTEs, planned the joins as nested loops:
-- cards^2 comparisons each, 0.6 s of the statement at 1,024 cards and growing).
SELECT ev, node_id, gpu_index, max(gpu_uuid) AS gpu_uuid, max(t0) AS t0,
       coalesce(sum(w_n), 0) + coalesce(sum(pz_n), 0) - coalesce(sum(pa_n), 0) AS n_corr,
       {columns}
FROM (
    SELECT ev, node_id, gpu_index, gpu_uuid, t0, 1 AS head, NULL::BIGINT AS w_n,
           NULL::BIGINT AS pz_n, NULL::BIGINT AS pa_n, {nulls} FROM heads
    UNION ALL
    SELECT ev, node_id, gpu_index, NULL, NULL, NULL, NULL, NULL, NULL, {pivot_list} FROM pivoted
    UNION ALL
    SELECT ev, node_id, gpu_index, NULL, NULL, NULL, n, NULL, NULL, {nulls} FROM whole
    UNION ALL
    SELECT ev, node_id, gpu_index, NULL, NULL, NULL, NULL, CASE WHEN j = 0 THEN n END,
           CASE WHEN j = {base_j} THEN n END, {nulls} FROM partial
) parts
GROUP BY ev, node_id, gpu_index
HAVING max(head) IS NOT NULL AND ({known_at_t0})
ORDER BY ev, node_id, gpu_index
"""

def _recent(params: RuleParams) -> str:
    """PostgreSQL's probe also reads the partial hour before a boundary: a value comes from
    [b - max_age, b] only, which holds that hour already when max_age is an hour or more."""
    if params.boundary_max_age >= timedelta(hours=1):
        return ""
    return " FILTER (WHERE q.sampled_at >= p.b - to_seconds($max_age))"


def _pivot_columns(params: RuleParams) -> list[str]:
    """Output columns after n_corr: corr_0..corr_{k+1} (k+1 = baseline), then the others."""
    n = len(offsets(params))
    return [f"corr_{j}" for j in range(n)] + ["unc_0", "fail_0", "pend_0", "pend_1", "ret_0",
                                              "ret_1", *(WEAK_PIVOTS if params.reads_weak
                                                         else ())]


# Only the cards of $card_nodes/$card_idx: every scan of the samples is semi-joined to them.
_CARDS_CTE: Final = """
sel_cards AS (SELECT unnest($card_nodes::VARCHAR[]) AS node_id,
                     unnest($card_idx::INTEGER[]) AS gpu_index),"""
_CARDS: Final = (" AND EXISTS (SELECT 1 FROM sel_cards c WHERE c.node_id = s.node_id"
                 " AND c.gpu_index = s.gpu_index)")

def build_sql(params: RuleParams, n_slices: int, dialect: Dialect, cards: bool = False,
              sharded: bool = False) -> str:
    """The statement for this parameter set with ``n_slices`` scan slices ($s0/$e0, ...) in the
    store's ``dialect``; ``cards``: only the cards of $card_nodes/$card_idx; ``sharded``: only
    the cards of shard $shard of $shards (an engine with a ``feature_shard`` fragment)."""
    if sharded and dialect.feature_shard is None:
        raise ValueError("this engine runs the features statement whole (no feature_shard)")
    columns = _pivot_columns(params)
    needed = _needed(params)
    semi = (_CARDS if cards else "") + ((dialect.feature_shard or "") if sharded else "")
    return fill_statement(
        _TEMPLATE,
        boundaries=dialect.feature_boundaries,
        asof=dialect.feature_asof,
        values_q=",\n               ".join(
            f"arg_max(q.{column}, q.sampled_at){_recent(params)} AS {alias}"
            for alias, column in needed.items()),
        cards_cte=_CARDS_CTE if cards else "",
        cards=semi,
        slices="\n    UNION ALL\n".join(
            fill_statement(_SLICE, i=i, columns=", ".join(needed.values()), cards=semi)
            for i in range(n_slices)),
        values=",\n           ".join(
            f"arg_max(s.{column}, s.sampled_at) AS {alias}" for alias, column in needed.items()),
        pivots=",\n           ".join(
            f"max({c.split('_')[0]}) FILTER (WHERE j = {c.split('_')[1]}) AS {c}"
            for c in columns),
        base_j=len(offsets(params)) - 1,
        columns=", ".join(f"max({c}) AS {c}" for c in columns),
        nulls=", ".join(f"NULL::BIGINT AS {c}" for c in columns),
        pivot_list=", ".join(columns),
        known_at_t0=" OR ".join(f"max({c}) IS NOT NULL" for c in ("corr_0", "unc_0", "fail_0",
                                                                   "pend_0", "ret_0")),
    )
