"""Alert state for GPU_FAULT_PREDICTED: ``gpu_health_alerts`` and ``gpu_health_alert_audit``.

Alerts are derived from the predictions table, so the state survives restarts and a second
evaluating instance computes the same thing:

- a ``real`` prediction (never ``simulated``, never a shadow version's) that is pending or hit,
  whose window has not ended, opens an alert for its node unless the node already has one open,
  or had one closed at or after the prediction was made (the operator has seen it); the
  earliest such prediction of a node wins
  and the alert id is derived from (node, prediction), so two instances insert the same row;
- an alert is closed only by an operator (:func:`resolve_alert`) or when its node has been missing
  from the scrape targets for the grace period (:func:`close_removed_nodes`, actor ``system``).
  A hit never closes it and nothing here ever claims recovery.

Every open and close is written to the audit table in the same transaction. All datetimes in and
out are aware UTC; the naive-UTC conversion happens here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from gpu_health.durations import format_duration
from gpu_health.evaluator.store.conflicts import retry_conflicts
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.sql import fill_statement

SYSTEM_ACTOR: Final = "system"

_OPEN = """
INSERT INTO gpu_health_alerts (id, node_id, tenant, prediction_id, opened_at)
SELECT left(sha256(c.node_id || '|' || c.id), 32), c.node_id, n.tenant, c.id, $now
FROM (
    SELECT p.id, p.node_id,
           row_number() OVER (PARTITION BY p.node_id ORDER BY p.predicted_at, p.id) AS rn
    FROM gpu_health_predictions p
    WHERE p.source = 'real' AND p.status IN ('pending', 'hit') AND p.shadow IS NOT TRUE
      AND p.window_end > $now
      AND NOT EXISTS (
          SELECT 1 FROM gpu_health_alerts a
          WHERE a.node_id = p.node_id
            AND (a.closed_at IS NULL OR a.closed_at >= p.predicted_at))
) c
LEFT JOIN gpu_health_nodes n ON n.node_id = c.node_id
WHERE c.rn = 1
ON CONFLICT DO NOTHING
RETURNING id, node_id, prediction_id
"""

# Everything the payload needs about one alert, from the alert row, the prediction that opened
# it, and the node's other live real predictions (a node-scoped alert covers all its cards).
_VIEW = """
SELECT a.id, a.node_id, a.tenant, a.opened_at, a.last_sent_at, a.closed_at, a.closed_by,
       a.close_reason, a.prediction_id, p.gpu_index, p.gpu_uuid, p.rule_version,
       p.window_days, p.t0, p.window_end, p.signal, p.layer, p.evidence, p.status, p.outcome,
       (SELECT array_agg(DISTINCT o.gpu_index ORDER BY o.gpu_index) FROM gpu_health_predictions o
        WHERE o.node_id = a.node_id AND o.source = 'real' AND o.status IN ('pending', 'hit')
          AND o.shadow IS NOT TRUE AND o.window_end > $now) AS gpus
FROM gpu_health_alerts a
LEFT JOIN gpu_health_predictions p ON p.id = a.prediction_id
WHERE {where}
ORDER BY a.opened_at, a.node_id
"""


@dataclass(frozen=True, slots=True)
class AlertView:
    """One alert with the prediction that opened it (prediction fields None if it is gone)."""

    id: str
    node_id: str
    tenant: str | None
    opened_at: datetime
    last_sent_at: datetime | None
    closed_at: datetime | None
    closed_by: str | None
    close_reason: str | None
    prediction_id: str
    gpu_index: int | None
    gpu_uuid: str | None
    rule_version: str | None
    window_days: int | None
    t0: datetime | None
    window_end: datetime | None
    signal: str | None
    layer: str | None
    evidence: str | None
    prediction_status: str | None
    outcome: str | None
    action: str | None = None  # the card's recommended action, set by the alert loop
    node_gpus: tuple[int, ...] = ()  # GPUs of the node with a live real prediction


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _view(row: Sequence[Any]) -> AlertView:
    (aid, node, tenant, opened, sent, closed, by, why, pid, gpu, uuid, version, window, t0,
     end, signal, layer, evidence, status, outcome, gpus) = row
    return AlertView(
        id=str(aid), node_id=str(node), tenant=_str(tenant), opened_at=opened,
        last_sent_at=sent, closed_at=closed, closed_by=_str(by),
        close_reason=_str(why), prediction_id=str(pid),
        gpu_index=None if gpu is None else int(gpu), gpu_uuid=_str(uuid),
        rule_version=_str(version), window_days=None if window is None else int(window),
        t0=t0, window_end=end, signal=_str(signal), layer=_str(layer),
        evidence=_str(evidence), prediction_status=_str(status), outcome=_str(outcome),
        node_gpus=tuple(int(g) for g in gpus or ()),
    )


def _audit(db: Database, now: datetime, actor: str, action: str,
           rows: Sequence[tuple[str, str, str]]) -> None:
    """Audit rows (node, alert id, reason) in one statement."""
    if not rows:
        return
    db.execute(
        # seq: the order of entries written at the same instant (newest first when listed)
        "INSERT INTO gpu_health_alert_audit (happened_at, actor, action, node_id, alert_id, "
        "reason, seq) SELECT $at, $actor, $action, unnest($nodes::VARCHAR[]), "
        "unnest($ids::VARCHAR[]), unnest($reasons::VARCHAR[]), (SELECT coalesce(max(seq), 0) "
        "FROM gpu_health_alert_audit) + unnest($ords::BIGINT[])",
        {"at": now, "actor": actor, "action": action,
         "ords": list(range(1, len(rows) + 1)),
         "nodes": [r[0] for r in rows], "ids": [r[1] for r in rows],
         "reasons": [r[2] for r in rows]},
    )


def open_new_alerts(db: Database, now: datetime) -> list[tuple[str, str, str]]:
    """Open the alerts the predictions call for; (alert id, node, prediction id) of new ones."""
    with db.transaction():
        rows = db.fetchall(_OPEN, {"now": now})
        opened = [(str(a), str(n), str(p)) for a, n, p in rows]
        _audit(db, now, SYSTEM_ACTOR, "open",
               [(node, aid, f"prediction {pid}") for aid, node, pid in opened])
    return opened


def open_alerts(db: Database, now: datetime) -> list[AlertView]:
    """Every open alert, oldest first."""
    sql = fill_statement(_VIEW, where="a.closed_at IS NULL")
    return [_view(r) for r in db.fetchall(sql, {"now": now})]


def closing_alerts(db: Database, now: datetime, horizon: timedelta) -> list[AlertView]:
    """Closed alerts whose end has not been acknowledged by every Alertmanager yet, closed
    within ``horizon`` (older ones have long expired in Alertmanager on their own)."""
    sql = fill_statement(_VIEW, where="a.closed_at IS NOT NULL AND a.end_sent_at IS NULL "
                             "AND a.closed_at >= $since")
    params = {"now": now, "since": now - horizon}
    return [_view(r) for r in db.fetchall(sql, params)]


def mark_sent(db: Database, sent: Collection[str], ended: Collection[str],
              now: datetime) -> None:
    """Record pushes accepted by at least one Alertmanager (``sent``) and closed alerts whose
    end every Alertmanager acknowledged (``ended``)."""
    if sent:
        db.execute("UPDATE gpu_health_alerts SET last_sent_at = $now "
                   "WHERE list_contains($ids, id)",
                   {"now": now, "ids": sorted(sent)})
    if ended:
        db.execute("UPDATE gpu_health_alerts SET end_sent_at = $now "
                   "WHERE list_contains($ids, id) AND closed_at IS NOT NULL",
                   {"now": now, "ids": sorted(ended)})


def resolve_alert(db: Database, node_id: str, *, actor: str, reason: str,
                  now: datetime) -> AlertView | None:
    """Close the node's open alert (operator action, audited); None when none is open."""

    def close() -> str | None:
        with db.transaction():
            rows = db.fetchall(
                "UPDATE gpu_health_alerts SET closed_at = $now, closed_by = $actor, "
                "close_reason = $reason WHERE node_id = $node AND closed_at IS NULL "
                "RETURNING id",
                {"now": now, "actor": actor, "reason": reason, "node": node_id},
            )
            if not rows:
                return None
            _audit(db, now, actor, "resolve", [(node_id, str(rows[0][0]), reason)])
            return str(rows[0][0])

    alert_id = retry_conflicts(close)
    if alert_id is None:
        return None
    sql = fill_statement(_VIEW, where="a.id = $id")
    return _view(db.fetchall(sql, {"now": now, "id": alert_id})[0])


def close_removed_nodes(db: Database, present: Collection[str], *, grace: timedelta,
                        now: datetime) -> list[tuple[str, str]]:
    """Track open alerts whose node is not among the ``present`` target nodes; close those
    missing for ``grace`` (actor ``system``, audited). Returns (alert id, node) closed now."""
    params: dict[str, Any] = {"now": now, "present": sorted(present)}
    reason = (f"node removed from the scrape targets for more than {format_duration(grace)} "
              "(not a recovery: the card was not observed healthy)")
    with db.transaction():
        db.execute("UPDATE gpu_health_alerts SET node_absent_since = NULL WHERE closed_at IS "
                   "NULL AND node_absent_since IS NOT NULL AND list_contains($present, node_id)",
                   {"present": params["present"]})
        db.execute("UPDATE gpu_health_alerts SET node_absent_since = $now WHERE closed_at IS "
                   "NULL AND node_absent_since IS NULL AND NOT list_contains($present, node_id)",
                   params)
        rows = db.fetchall(
            "UPDATE gpu_health_alerts SET closed_at = $now, closed_by = $actor, "
            "close_reason = $reason WHERE closed_at IS NULL "
            "AND node_absent_since <= $cutoff RETURNING id, node_id",
            {"now": params["now"], "actor": SYSTEM_ACTOR, "reason": reason,
             "cutoff": now - grace},
        )
        closed = [(str(a), str(n)) for a, n in rows]
        _audit(db, now, SYSTEM_ACTOR, "close_node_removed",
               [(node, aid, reason) for aid, node in closed])
    return closed


