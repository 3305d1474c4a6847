"""The Slurm remediation audit, ``gpu_health_remediations`` (docs/slurm.md).

Each drain, resume and refusal the remediation loop decides is a row (who, when, why, what Slurm
was asked, what came of it), written only when the result for that alert and step changed, so a
cap that holds for an hour is one row, not one per tick. The loop reads back the last result per
alert and step to know which decisions are final, and the alerts an operator closed after a drain
of ours (the resume candidates).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.sql import unnest_rows

_COLUMNS = ("actor", "step", "result", "alert_id", "node_id", "slurm_node", "gpu_index",
            "card_action", "slurm_reason", "reason")


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audit row (``gpu_index`` None when the step is about the node)."""

    step: str
    result: str
    alert_id: str
    node_id: str
    slurm_node: str | None
    reason: str
    gpu_index: int | None = None
    card_action: str | None = None
    slurm_reason: str | None = None


def last_results(db: Database, alert_ids: Sequence[str]) -> dict[tuple[str, str], str]:
    """The newest result per (alert id, step) of the given alerts."""
    if not alert_ids:
        return {}
    rows = db.fetchall(
        "SELECT DISTINCT ON (alert_id, step) alert_id, step, result "
        "FROM gpu_health_remediations WHERE list_contains($ids, alert_id) "
        "ORDER BY alert_id, step, happened_at DESC, seq DESC", {"ids": sorted(set(alert_ids))})
    return {(str(a), str(s)): str(r) for a, s, r in rows}


def last_by_slurm_node(db: Database, names: Collection[str]) -> dict[str, tuple[str, ...]]:
    """The newest audited (alert id, node id, step, result) per Slurm node of ``names``."""
    if not names:
        return {}
    rows = db.fetchall(
        "SELECT DISTINCT ON (slurm_node) slurm_node, alert_id, node_id, step, result "
        "FROM gpu_health_remediations WHERE list_contains($names, slurm_node) "
        "AND result NOT IN ('dry_run', 'failed') "
        "ORDER BY slurm_node, happened_at DESC, seq DESC", {"names": sorted(names)})
    return {str(n): (str(a), str(node), str(s), str(r)) for n, a, node, s, r in rows}


def confirm_leadership(db: Database) -> None:
    """One statement before a command changes Slurm: under the leader's fence (PostgreSQL) its
    transaction first checks the lease token, so an evaluator that lost the lease since it
    decided does not run the command (a call already running when it loses it can still
    complete: the next leader's tick repairs what it left)."""
    db.execute("SELECT 1")


def resume_candidates(db: Database, final: Collection[str]) -> list[tuple[str, str, str]]:
    """(alert id, node, closed_by) of closed alerts whose node we drained (``done`` or
    ``already_ours``) and whose resume has no ``final`` result yet (the policy's vocabulary)."""
    rows = db.fetchall(
        "SELECT a.id, a.node_id, a.closed_by FROM gpu_health_alerts a "
        "WHERE a.closed_at IS NOT NULL AND EXISTS (SELECT 1 FROM gpu_health_remediations r "
        "  WHERE r.alert_id = a.id AND r.step = 'drain' AND r.result IN ('done', 'already_ours'))"
        " AND NOT EXISTS (SELECT 1 FROM gpu_health_remediations r WHERE r.alert_id = a.id "
        "  AND r.step = 'resume' AND list_contains($final, r.result)) ORDER BY a.closed_at, a.id",
        {"final": sorted(final)})
    return [(str(a), str(n), str(c)) for a, n, c in rows]


def record(db: Database, now: datetime, actor: str, entries: Sequence[AuditEntry],
           last: Mapping[tuple[str, str], str]) -> list[AuditEntry]:
    """Write the entries whose result differs from ``last``; returns those written."""
    new = [e for e in entries if last.get((e.alert_id, e.step)) != e.result]
    if not new:
        return []
    values = [[actor, e.step, e.result, e.alert_id, e.node_id, e.slurm_node, e.gpu_index,
               e.card_action, e.slurm_reason, e.reason] for e in new]
    columns = list(zip(*values, strict=True))
    casts = ("VARCHAR",) * 6 + ("INTEGER",) + ("VARCHAR",) * 3
    db.execute(
        f"INSERT INTO gpu_health_remediations (happened_at, seq, {', '.join(_COLUMNS)}) "
        f"SELECT $happened_at, (SELECT coalesce(max(seq), 0) FROM gpu_health_remediations) "
        f"+ unnest($seqs::BIGINT[]), {unnest_rows(_COLUMNS, casts)}",
        {"happened_at": now, "seqs": list(range(1, len(new) + 1)),
         **{name: list(c) for name, c in zip(_COLUMNS, columns, strict=True)}})
    return new


def audit(db: Database, node_id: str | None = None, limit: int = 100) -> list[
        tuple[datetime, str, AuditEntry]]:
    """The newest rows (of one node), newest first: (when, actor, entry)."""
    where, params = ("WHERE node_id = $node", {"node": node_id}) if node_id else ("", {})
    rows = db.fetchall(
        f"SELECT happened_at, {', '.join(_COLUMNS)} FROM gpu_health_remediations {where} "
        f"ORDER BY happened_at DESC, seq DESC LIMIT $limit", {**params, "limit": limit})
    return [(at, str(actor), AuditEntry(step, result, aid, node, slurm, reason, gpu,
                                                   card, sreason))
            for at, actor, step, result, aid, node, slurm, gpu, card, sreason, reason in rows]
