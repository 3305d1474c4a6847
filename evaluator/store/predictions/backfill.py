"""What the samples show inside every pending prediction's window: one set-based query.

For all pending predictions at once (never one query per card): the slot's rows in
``(t0, min(window_end, now)]`` (the window is compared on the stored columns, so there is no
precision drift), counted by UUID, and the first fault event of the predicted card:

- the first uncorrectable-ECC increase point: a ``lag()`` over the series "value at t0 (stored
  with the prediction), then every known in-window value"; it runs only for predictions whose
  in-window values moved at all (max > min, or max > value at t0), a cheap aggregate that leaves
  almost every window out of the window-function pass;
- the first memory-XID event (``xid_samples.XID_EVENT``) of one of the XIDs that the
  prediction's OWN rule version counts as faults. Those come from the version's frozen
  parameters in ``gpu_health_rule_versions`` (``fault_xids``), read by the one cheap lookup that
  precedes the query; a version without them (v1-ecc-growth) or without a record is ECC-only, so
  its predictions never become hits through XIDs. The ``lag()`` runs over the whole history of
  the candidate series (change-only rows: the previous count is usually older than t0).

The classification into hit / miss / voided is pure (:mod:`gpu_health.evaluator.rules.outcome`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from gpu_health.evaluator.rules.faults import fault_xids_from_json
from gpu_health.evaluator.rules.outcome import WindowObservation
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.predictions.window_edges import refresh_edges
from gpu_health.evaluator.store.readings.rollups import EPOCH, sealed_until
from gpu_health.evaluator.store.readings.xid_samples import TABLE as XID_TABLE
from gpu_health.evaluator.store.readings.xid_samples import XID_EVENT, XID_EVENT_BEFORE, XID_PREV
from gpu_health.evaluator.store.rollup_sql import (
    AGGREGATE,
    DAYS,
    EDGES,
    FIELDS,
    FIRST_INCREASE,
    prev_unc,
)
from gpu_health.evaluator.store.sql import fill_statement

# Per pending prediction: the partial first day of its window is a head edge when that day is
# sealed (lead_end <= cov), the partial last day a tail edge once the window is over and that day
# sealed (:mod:`gpu_health.evaluator.store.predictions.window_edges`); the sealed days between come
# from the rollups and the rest (tail_from to upto) from the raw rows. $sealed: the watermark (the
# epoch when none).
_PEND: Final = """
    SELECT *, CASE WHEN use_trail THEN trail_start ELSE cov END AS days_end,
           CASE WHEN use_trail THEN NULL WHEN use_lead THEN cov ELSE t0 END AS tail_from
    FROM (SELECT *, lead_end <= cov AS use_lead,
                 matured AND lead_end <= cov AND trail_start + INTERVAL '1 day' <= $sealed
                     AS use_trail
          FROM (SELECT id, node_id, gpu_index, gpu_uuid, source, rule_version, t0, window_end,
                       uncorrected_at_t0 AS unc0, least(window_end, $now) AS upto,
                       window_end <= $now AS matured,
                       date_trunc('day', t0) + INTERVAL '1 day' AS lead_end,
                       date_trunc('day', window_end) AS trail_start,
                       CASE WHEN $sealed <= least(window_end, $now) + INTERVAL '1 microsecond'
                            THEN $sealed  -- as rollups.covered
                            ELSE date_trunc('day', least(window_end, $now)
                                            + INTERVAL '1 microsecond') END AS cov
                FROM gpu_health_predictions
                WHERE status = 'pending' AND t0 < $now{only}) AS p0) AS p1"""

_PENDING_VERSIONS: Final = """
SELECT p.rule_version, min(p.tail_from), any_value(r.params_json), min(p.lead_end)
FROM ({pend}) p
LEFT JOIN gpu_health_rule_versions r ON r.version = p.rule_version
GROUP BY p.rule_version
"""

_XID_HITS: Final = f"""
fx AS (SELECT unnest($fx_versions::VARCHAR[]) AS version, unnest($fx_xids::INTEGER[]) AS xid),
xcand AS (
    SELECT p.id, p.node_id, p.gpu_index, p.source, p.gpu_uuid, p.t0, p.upto, fx.xid
    FROM pend p JOIN fx ON fx.version = p.rule_version
),
xev AS (
    SELECT *, {XID_EVENT_BEFORE} AS before FROM (
        SELECT x.node_id, x.gpu_index, x.source, x.gpu_uuid, x.xid, x.sampled_at, x.count,
               {XID_PREV} AS prev
        FROM {XID_TABLE} x
        WHERE x.sampled_at <= $now AND EXISTS (
            SELECT 1 FROM xcand c WHERE c.node_id = x.node_id AND c.gpu_index = x.gpu_index
                                    AND c.source = x.source AND c.xid = x.xid)
    ) AS xs
    WHERE {XID_EVENT}
),
xhits AS (
    -- the first event in the window; same instant: the lowest code, so the text is stable
    SELECT DISTINCT ON (c.id) c.id, e.sampled_at AS xid_at, e.xid, e.before, e.count AS after
    FROM xcand c
    JOIN xev e
      ON e.node_id = c.node_id AND e.gpu_index = c.gpu_index AND e.source = c.source
     AND e.xid = c.xid AND e.gpu_uuid IS NOT DISTINCT FROM c.gpu_uuid
     AND e.sampled_at > c.t0 AND e.sampled_at <= c.upto
    ORDER BY c.id, e.sampled_at, e.xid
)"""

_NO_XID_HITS: Final = """
xhits AS (
    SELECT NULL::VARCHAR AS id, NULL::TIMESTAMP AS xid_at, NULL::INTEGER AS xid,
           NULL::BIGINT AS before, NULL::BIGINT AS after
    WHERE false
)"""

# Sealed history: the head/tail edges and the sealed days between them.
_SEALED_SEGS: Final = f"""
    SELECT p.id, l.gpu_uuid, {", ".join("l." + f for f in FIELDS)}
    FROM pend p JOIN {EDGES} l ON l.prediction_id = p.id
    WHERE l.segment AND ((l.edge = 'head' AND p.use_lead) OR (l.edge = 'tail' AND p.use_trail))
    UNION ALL
    SELECT p.id, d.gpu_uuid, {", ".join("d." + f for f in FIELDS)}
    FROM pend p JOIN {DAYS} d
      ON d.source = p.source AND d.node_id = p.node_id AND d.gpu_index = p.gpu_index
     AND d.day >= p.lead_end AND d.day < p.days_end
    WHERE p.use_lead AND d.day >= $dmin
    UNION ALL"""

# The raw rows after them (all of the window when nothing is sealed).
_RAW_SEGS: Final = f"""
    SELECT id, gpu_uuid, {AGGREGATE} FROM (
        SELECT p.id, s.*, {prev_unc("p.id, s.gpu_uuid")} AS prev
        FROM pend p JOIN gpu_health_samples s
          ON s.node_id = p.node_id AND s.gpu_index = p.gpu_index AND s.source = p.source
         AND s.sampled_at > p.t0 AND s.sampled_at >= p.tail_from AND s.sampled_at <= p.upto
        WHERE s.sampled_at >= $lo AND s.sampled_at <= $now) AS r
    GROUP BY id, gpu_uuid"""

def _observe(pend: str, sealed: str, xid_hits: str) -> str:
    """The observation statement over the pending predictions ``pend``, with the ``sealed``
    history's segments (or none) and the XID hits (or none)."""
    return f"""
WITH pend AS ({pend}),
segs AS ({sealed}{_RAW_SEGS}),
tagged AS (
    SELECT s.*, s.gpu_uuid IS NOT DISTINCT FROM p.gpu_uuid AS same
    FROM segs s JOIN pend p USING (id)
),
agg AS (
    SELECT id, sum(n_rows) AS n,
           sum(n_rows) FILTER (WHERE NOT same) AS n_other,
           arg_min_null(gpu_uuid, first_at) FILTER (WHERE NOT same) AS other_uuid,
           min(first_at) FILTER (WHERE NOT same) AS other_at,
           sum(n_ecc_uncorrected_total) FILTER (WHERE same) AS n_known,
           min(unc_min) FILTER (WHERE same) AS mn,
           max(unc_max) FILTER (WHERE same) AS mx,
           max(last_at) AS last_at
    FROM tagged GROUP BY id
),
series AS (
    -- the value at t0 (stored with the prediction), then the window's same-UUID segments
    SELECT id, t0 AS unc_first_at, unc0 AS unc_first, unc0 AS unc_last, NULL::TIMESTAMP AS inc_at,
           NULL::BIGINT AS inc_before, NULL::BIGINT AS inc_after
    FROM pend WHERE unc0 IS NOT NULL
    UNION ALL
    SELECT id, unc_first_at, unc_first, unc_last, inc_at, inc_before, inc_after
    FROM tagged WHERE same
),
events AS ({fill_statement(FIRST_INCREASE, key="id", segs="series")}),
{xid_hits}
SELECT p.id, p.gpu_uuid, p.matured, coalesce(a.n, 0), coalesce(a.n_other, 0), a.other_uuid,
       a.other_at, coalesce(a.n_known, 0), p.unc0, a.mx, a.last_at, e.event_at, e.before, e.after,
       x.xid_at, x.xid, x.before, x.after
FROM pend p
LEFT JOIN agg a USING (id)
LEFT JOIN events e USING (id)
LEFT JOIN xhits x USING (id)
WHERE p.matured OR e.event_at IS NOT NULL OR x.xid_at IS NOT NULL
ORDER BY p.id
"""


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def observe_pending(db: Database, now: datetime,
                    ids: Sequence[str] | None = None) -> list[WindowObservation]:
    """Observations of the pending predictions that can be decided now (a fault was seen, or
    the window is over). Rows after ``now`` (future-dated) are never looked at. ``ids``: only
    these predictions (a replay observing one window on behalf of identical ones)."""
    refresh_edges(db, now)
    sealed_at = sealed_until(db)
    sealed = sealed_at or EPOCH
    only = "" if ids is None else " AND id IN (SELECT unnest($only_ids::VARCHAR[]))"
    pend = fill_statement(_PEND, only=only)
    # One cheap lookup: the oldest raw row any window still needs bounds the sample scan (row
    # groups before it are skipped), and each pending version's frozen fault definition. With
    # nothing pending the big query is not run at all.
    base: dict[str, Any] = {"now": now, "sealed": sealed}
    if ids is not None:
        base["only_ids"] = list(ids)
    versions = db.fetchall(fill_statement(_PENDING_VERSIONS, pend=pend), base)
    if not versions:
        return []
    pairs = [(str(v), x) for v, _, params_json, _ in versions
             for x in fault_xids_from_json(params_json)]
    params: dict[str, Any] = {**base,
                              # None: every window is read from edges and sealed days
                              "lo": min((r[1] for r in versions if r[1] is not None),
                                        default=None)}
    if pairs:
        params["fx_versions"] = [v for v, _ in pairs]
        params["fx_xids"] = [x for _, x in pairs]
    # Nothing sealed (a backtest file, a new store): no edge or sealed day can match, and the
    # smaller statement plans faster (paid on every tick of a replay).
    if sealed_at is not None:
        params["dmin"] = min(row[3] for row in versions)
    sql = _observe(pend, "" if sealed_at is None else _SEALED_SEGS,
                   _XID_HITS if pairs else _NO_XID_HITS)
    return [_row(r) for r in db.fetchall(sql, params)]


def _row(r: Sequence[Any]) -> WindowObservation:
    return WindowObservation(
        prediction_id=str(r[0]),
        gpu_uuid=None if r[1] is None else str(r[1]),
        matured=bool(r[2]),
        samples=int(r[3]),
        other_uuid_samples=int(r[4]),
        other_uuid=None if r[5] is None else str(r[5]),
        other_uuid_at=r[6],
        known_uncorrected=int(r[7]),
        uncorrected_at_t0=_int(r[8]),
        max_uncorrected=_int(r[9]),
        last_sample_at=r[10],
        fault_at=r[11],
        fault_before=_int(r[12]),
        fault_after=_int(r[13]),
        xid_fault_at=r[14],
        xid=_int(r[15]),
        xid_before=_int(r[16]),
        xid_after=_int(r[17]),
    )
