"""Queries on ``gpu_health_predictions`` and ``gpu_health_rule_versions``.

Multi-instance safety (reference "多实例与租户隔离") rests on two store properties, not on luck:
- a prediction's id is derived from (node, index, uuid, source, rule version, window, t0 as
  stored), so two instances scanning the same samples compute the same id and the primary key
  keeps one row (``ON CONFLICT DO NOTHING``);
- every outcome is written with ``UPDATE ... WHERE status = 'pending'`` (compare-and-set), so only
  one instance's decision lands.
DuckDB uses optimistic concurrency: when two cursors write the same row at the same moment, the
second statement fails with a TransactionException ("Conflict on update", or a primary-key
violation at commit) instead of waiting; PostgreSQL waits, and reports only a deadlock or a
serialization failure. The store reports all of them as ``reason="conflict"``. The statements
here are idempotent, so they are simply re-run: the retry sees the winner's row and does
nothing to it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpu_health.evaluator.model import RESOLVED
from gpu_health.evaluator.rules.evaluation import Decision
from gpu_health.evaluator.rules.outcome import Outcome
from gpu_health.evaluator.store.conflicts import retry_conflicts
from gpu_health.evaluator.store.db import Database, Params

log = logging.getLogger(__name__)



@dataclass(frozen=True, slots=True)
class NewPrediction:
    """A prediction row this call inserted (what alerting pushes)."""

    id: str
    node_id: str
    gpu_index: int
    gpu_uuid: str | None
    source: str
    rule_version: str
    window_days: int
    t0: datetime
    window_end: datetime
    predicted_at: datetime
    signal: str
    layer: str
    evidence: str
    uncorrected_at_t0: int | None


def run_idempotent(db: Database, sql: str, params: Params) -> list[Any]:
    """fetchall, re-run on a write-write conflict with a concurrent instance (see module doc)."""
    return retry_conflicts(lambda: db.fetchall(sql, params))


def prediction_id(node_id: str, gpu_index: int, gpu_uuid: str | None, source: str,
                  rule_version: str, window_days: int, t0: datetime) -> str:
    """Deterministic id; t0 is written as the store holds it (UTC without an offset, to the
    microsecond), the text every earlier release hashed."""
    stored = t0.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    key = "|".join((node_id, str(gpu_index), gpu_uuid or "", source, rule_version,
                    str(window_days), stored))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


_INSERT = """
INSERT INTO gpu_health_predictions
    (id, node_id, gpu_index, gpu_uuid, source, rule_version, window_days, t0, window_end,
     predicted_at, signal, layer, evidence, uncorrected_at_t0, status, shadow)
SELECT n.id, n.node_id, n.gpu_index, n.gpu_uuid, n.source, $version::VARCHAR,
       $window_days::INTEGER, n.t0, n.t0 + to_days($window_days::INTEGER), $now::TIMESTAMP,
       n.signal, n.layer, n.evidence, n.unc0, 'pending', $shadow::BOOLEAN
FROM (
    SELECT unnest($ids::VARCHAR[]) AS id, unnest($nodes::VARCHAR[]) AS node_id,
           unnest($indexes::INTEGER[]) AS gpu_index, unnest($uuids::VARCHAR[]) AS gpu_uuid,
           unnest($sources::VARCHAR[]) AS source, unnest($t0s::TIMESTAMP[]) AS t0,
           unnest($signals::VARCHAR[]) AS signal, unnest($layers::VARCHAR[]) AS layer,
           unnest($evidence::VARCHAR[]) AS evidence, unnest($unc0::BIGINT[]) AS unc0
) n
WHERE NOT EXISTS (
    -- one open window per card: without this a degrading card gets a new t0 (and id) every
    -- tick and floods the precision denominator
    SELECT 1 FROM gpu_health_predictions p
    WHERE p.node_id = n.node_id AND p.gpu_index = n.gpu_index AND p.source = n.source
      AND p.rule_version = $version::VARCHAR AND p.window_end > n.t0
)
ON CONFLICT DO NOTHING
RETURNING id, node_id, gpu_index, gpu_uuid, source, rule_version, window_days, t0, window_end,
          predicted_at, signal, layer, evidence, uncorrected_at_t0
"""


def insert_predictions(db: Database, decisions: Sequence[Decision], *, rule_version: str,
                       window_days: int, now: datetime,
                       shadow: bool = False) -> list[NewPrediction]:
    """Insert one pending prediction per decision (at most one decision per card per call),
    skipping cards with an unexpired window; return the rows actually inserted. ``shadow``:
    made by a version run beside the active one (never alerted, out of default statistics)."""
    if not decisions:
        return []
    f = [d.features for d in decisions]
    params = {
        "version": rule_version,
        "window_days": window_days,
        "now": now,
        "shadow": shadow,
        "ids": [prediction_id(x.node_id, x.gpu_index, x.gpu_uuid, x.source, rule_version,
                              window_days, x.t0) for x in f],
        "nodes": [x.node_id for x in f],
        "indexes": [x.gpu_index for x in f],
        "uuids": [x.gpu_uuid for x in f],
        "sources": [x.source for x in f],
        "t0s": [x.t0 for x in f],
        "signals": [d.signal for d in decisions],
        "layers": [d.layer for d in decisions],
        "evidence": [d.evidence for d in decisions],
        "unc0": [x.uncorrected for x in f],
    }
    rows = run_idempotent(db, _INSERT, params)
    return sorted((_new_prediction(r) for r in rows), key=lambda p: (p.node_id, p.gpu_index))


def _new_prediction(row: Sequence[Any]) -> NewPrediction:
    (pid, node_id, gpu_index, gpu_uuid, source, version, window_days, t0, window_end,
     predicted_at, signal, layer, evidence, unc0) = row
    return NewPrediction(
        str(pid), str(node_id), int(gpu_index), None if gpu_uuid is None else str(gpu_uuid),
        str(source), str(version), int(window_days), t0,
        window_end, predicted_at, str(signal), str(layer),
        str(evidence), None if unc0 is None else int(unc0),
    )


_RESOLVE = """
UPDATE gpu_health_predictions AS p
SET status = $status, resolved_at = $now, outcome = x.outcome
FROM (SELECT unnest($ids::VARCHAR[]) AS id, unnest($outcomes::VARCHAR[]) AS outcome) x
WHERE p.id = x.id AND p.status = 'pending'
RETURNING p.id
"""


def resolve(db: Database, outcomes: Sequence[Outcome], now: datetime) -> dict[str, int]:
    """One compare-and-set UPDATE per outcome kind; returns how many rows THIS call changed."""
    changed: dict[str, int] = dict.fromkeys(RESOLVED, 0)
    for status in changed:
        chosen = [o for o in outcomes if o.status == status]
        if not chosen:
            continue
        rows = run_idempotent(db, _RESOLVE, {
            "status": status,
            "now": now,
            "ids": [o.prediction_id for o in chosen],
            "outcomes": [o.explanation for o in chosen],
        })
        changed[status] = len(rows)
    return changed


def pending_of(db: Database, version: str) -> list[NewPrediction]:
    """The version's pending predictions (a replay that goes on from an earlier one)."""
    rows = db.fetchall(
        "SELECT id, node_id, gpu_index, gpu_uuid, source, rule_version, window_days, t0, "
        "window_end, predicted_at, signal, layer, evidence, uncorrected_at_t0 "
        "FROM gpu_health_predictions WHERE rule_version = $version AND status = 'pending' "
        "ORDER BY id", {"version": version})
    return [_new_prediction(r) for r in rows]


_INSERT_ROWS = """
INSERT INTO gpu_health_predictions
    (id, node_id, gpu_index, gpu_uuid, source, rule_version, window_days, t0, window_end,
     predicted_at, signal, layer, evidence, uncorrected_at_t0, status, shadow)
SELECT unnest($ids::VARCHAR[]), unnest($nodes::VARCHAR[]), unnest($indexes::INTEGER[]),
       unnest($uuids::VARCHAR[]), unnest($sources::VARCHAR[]), unnest($versions::VARCHAR[]),
       unnest($windows::INTEGER[]), unnest($t0s::TIMESTAMP[]), unnest($ends::TIMESTAMP[]),
       unnest($predicted::TIMESTAMP[]), unnest($signals::VARCHAR[]),
       unnest($layers::VARCHAR[]), unnest($evidence::VARCHAR[]), unnest($unc0::BIGINT[]),
       'pending', false
ON CONFLICT DO NOTHING
"""


def insert_rows(db: Database, rows: Sequence[NewPrediction]) -> None:
    """Insert predictions made elsewhere (a replay that applied the one-open-window rule
    itself) as pending rows, in one statement."""
    if not rows:
        return
    db.execute(_INSERT_ROWS, {
        "ids": [r.id for r in rows], "nodes": [r.node_id for r in rows],
        "indexes": [r.gpu_index for r in rows], "uuids": [r.gpu_uuid for r in rows],
        "sources": [r.source for r in rows], "versions": [r.rule_version for r in rows],
        "windows": [r.window_days for r in rows], "t0s": [r.t0 for r in rows],
        "ends": [r.window_end for r in rows],
        "predicted": [r.predicted_at for r in rows],
        "signals": [r.signal for r in rows], "layers": [r.layer for r in rows],
        "evidence": [r.evidence for r in rows], "unc0": [r.uncorrected_at_t0 for r in rows],
    })


_RESOLVE_EACH = """
UPDATE gpu_health_predictions AS p
SET status = x.status, resolved_at = x.at, outcome = x.outcome
FROM (SELECT unnest($ids::VARCHAR[]) AS id, unnest($statuses::VARCHAR[]) AS status,
             unnest($ats::TIMESTAMP[]) AS at, unnest($outcomes::VARCHAR[]) AS outcome) x
WHERE p.id = x.id AND p.status = 'pending'
RETURNING p.id
"""


def resolve_each(db: Database, decided: Sequence[tuple[Outcome, datetime]]) -> dict[str, int]:
    """Compare-and-set outcomes, each with its own resolution time (a replay that decides
    many ticks' outcomes at once); returns how many rows of each status changed."""
    changed: dict[str, int] = dict.fromkeys(RESOLVED, 0)
    if not decided:
        return changed
    rows = run_idempotent(db, _RESOLVE_EACH, {
        "ids": [o.prediction_id for o, _ in decided],
        "statuses": [o.status for o, _ in decided],
        "ats": [at for _, at in decided],
        "outcomes": [o.explanation for o, _ in decided],
    })
    written = {str(r[0]) for r in rows}
    for o, _ in decided:
        changed[o.status] += o.prediction_id in written
    return changed
