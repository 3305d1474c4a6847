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

The classification into hit / miss / voided is pure (:mod:`evaluator.rules.outcome`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from evaluator.rules.faults import fault_xids_from_json
from evaluator.rules.outcome import WindowObservation
from evaluator.store.db import Database
from evaluator.store.xid_samples import TABLE as XID_TABLE
from evaluator.store.xid_samples import XID_EVENT, XID_EVENT_BEFORE, XID_PREV
from gpu_health.clock import from_naive_utc, to_naive_utc

_PENDING_VERSIONS: Final = """
SELECT p.rule_version, min(p.t0), any_value(r.params_json)
FROM gpu_health_predictions p
LEFT JOIN gpu_health_rule_versions r ON r.version = p.rule_version
WHERE p.status = 'pending' AND p.t0 < ?
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
        SEMI JOIN xcand c ON c.node_id = x.node_id AND c.gpu_index = x.gpu_index
                         AND c.source = x.source AND c.xid = x.xid
        WHERE x.sampled_at <= $now
    )
    WHERE {XID_EVENT}
),
xhits AS (
    -- the first event in the window; same instant: the lowest code, so the text is stable
    SELECT c.id, e.sampled_at AS xid_at, e.xid, e.before, e.count AS after
    FROM xcand c
    JOIN xev e
      ON e.node_id = c.node_id AND e.gpu_index = c.gpu_index AND e.source = c.source
     AND e.xid = c.xid AND e.gpu_uuid IS NOT DISTINCT FROM c.gpu_uuid
     AND e.sampled_at > c.t0 AND e.sampled_at <= c.upto
    QUALIFY row_number() OVER (PARTITION BY c.id ORDER BY e.sampled_at, e.xid) = 1
)"""

_NO_XID_HITS: Final = """
xhits AS (
    SELECT NULL::VARCHAR AS id, NULL::TIMESTAMP AS xid_at, NULL::INTEGER AS xid,
           NULL::BIGINT AS before, NULL::BIGINT AS after
    WHERE false
)"""

_OBSERVE: Final = """
WITH pend AS (
    SELECT id, node_id, gpu_index, gpu_uuid, source, rule_version, t0,
           uncorrected_at_t0 AS unc0, least(window_end, $now) AS upto,
           window_end <= $now AS matured
    FROM gpu_health_predictions
    WHERE status = 'pending' AND t0 < $now
),
inwin AS (
    SELECT p.id, s.sampled_at, s.gpu_uuid, s.ecc_uncorrected_total AS unc,
           s.gpu_uuid IS NOT DISTINCT FROM p.gpu_uuid AS same
    FROM pend p
    JOIN gpu_health_samples s
      ON s.node_id = p.node_id AND s.gpu_index = p.gpu_index AND s.source = p.source
     AND s.sampled_at > p.t0 AND s.sampled_at <= p.upto
    WHERE s.sampled_at > $lo AND s.sampled_at <= $now
),
agg AS (
    SELECT id, count(*) AS n,
           count(*) FILTER (WHERE NOT same) AS n_other,
           arg_min_null(gpu_uuid, sampled_at) FILTER (WHERE NOT same) AS other_uuid,
           min(sampled_at) FILTER (WHERE NOT same) AS other_at,
           count(unc) FILTER (WHERE same) AS n_known,
           min(unc) FILTER (WHERE same) AS mn,
           max(unc) FILTER (WHERE same) AS mx,
           max(sampled_at) AS last_at
    FROM inwin GROUP BY id
),
moved AS (
    SELECT a.id, p.t0, p.unc0 FROM agg a JOIN pend p USING (id)
    WHERE a.mx > a.mn OR a.mx > p.unc0
),
series AS (
    SELECT id, t0 AS sampled_at, unc0 AS unc FROM moved WHERE unc0 IS NOT NULL
    UNION ALL
    SELECT i.id, i.sampled_at, i.unc FROM inwin i SEMI JOIN moved m ON m.id = i.id
    WHERE i.same AND i.unc IS NOT NULL
),
events AS (
    SELECT id, min(sampled_at) AS at, arg_min(prev, sampled_at) AS before,
           arg_min(unc, sampled_at) AS after
    FROM (SELECT id, sampled_at, unc,
                 lag(unc) OVER (PARTITION BY id ORDER BY sampled_at) AS prev
          FROM series)
    WHERE unc > prev
    GROUP BY id
),
{xid_hits}
SELECT p.id, p.gpu_uuid, p.matured, coalesce(a.n, 0), coalesce(a.n_other, 0), a.other_uuid,
       a.other_at, coalesce(a.n_known, 0), p.unc0, a.mx, a.last_at, e.at, e.before, e.after,
       x.xid_at, x.xid, x.before, x.after
FROM pend p
LEFT JOIN agg a USING (id)
LEFT JOIN events e USING (id)
LEFT JOIN xhits x USING (id)
WHERE p.matured OR e.at IS NOT NULL OR x.xid_at IS NOT NULL
ORDER BY p.id
"""


def _time(value: Any) -> datetime | None:
    return None if value is None else from_naive_utc(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def observe_pending(db: Database, now: datetime) -> list[WindowObservation]:
    """Observations of the pending predictions that can be decided now (a fault was seen, or
    the window is over). Rows after ``now`` (future-dated) are never looked at."""
    naive = to_naive_utc(now)
    # One cheap lookup: the oldest open window bounds the sample scan (row groups before it are
    # skipped), and each pending version's frozen fault definition. With nothing pending the
    # big query is not run at all.
    versions = db.fetchall(_PENDING_VERSIONS, [naive])
    if not versions:
        return []
    lo = min(row[1] for row in versions)
    pairs = [(str(v), x) for v, _, params_json in versions
             for x in fault_xids_from_json(params_json)]
    params: dict[str, Any] = {"now": naive, "lo": lo}
    if pairs:
        params["fx_versions"] = [v for v, _ in pairs]
        params["fx_xids"] = [x for _, x in pairs]
    sql = _OBSERVE.format(xid_hits=_XID_HITS if pairs else _NO_XID_HITS)
    return [_row(r) for r in db.fetchall(sql, params)]


def _row(r: Sequence[Any]) -> WindowObservation:
    return WindowObservation(
        prediction_id=str(r[0]),
        gpu_uuid=None if r[1] is None else str(r[1]),
        matured=bool(r[2]),
        samples=int(r[3]),
        other_uuid_samples=int(r[4]),
        other_uuid=None if r[5] is None else str(r[5]),
        other_uuid_at=_time(r[6]),
        known_uncorrected=int(r[7]),
        uncorrected_at_t0=_int(r[8]),
        max_uncorrected=_int(r[9]),
        last_sample_at=_time(r[10]),
        fault_at=_time(r[11]),
        fault_before=_int(r[12]),
        fault_after=_int(r[13]),
        xid_fault_at=_time(r[14]),
        xid=_int(r[15]),
        xid_before=_int(r[16]),
        xid_after=_int(r[17]),
    )
