"""The remediation loop: drain Slurm nodes for GPU_FAULT_PREDICTED alerts, resume them when an
operator resolves the alert (docs/slurm.md). One tick:

1. read the open alerts, the closed alerts whose node we drained, and the last audited result
   of each (a database thread);
2. when one of them still needs a decision, read ``sinfo`` once and let the pure policy
   (:mod:`gpu_health.evaluator.remediation.policy`) decide;
3. run each ``scontrol update`` it asks for (a failure is ``failed``, retried next tick);
4. audit every result that changed, log it and count it
   (``gpu_health_evaluator_remediation_total{action,result}``).

The state lives in the store, so a restart or a new leader carries on where the last one
stopped. It runs on the leader only (like the alert loop), and the app's catch-all logs and counts
a failed tick (``sinfo`` missing or failing: nothing is decided that tick).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Final

from prometheus_client import CollectorRegistry, Counter

from gpu_health.clock import Clock
from gpu_health.errors import CollectError
from gpu_health.evaluator.config.remediation import SlurmRemediation
from gpu_health.evaluator.remediation.policy import (
    DRAIN,
    FINAL,
    RESUME,
    AlertRow,
    LastStep,
    Step,
    decide,
)
from gpu_health.evaluator.remediation.slurm import Slurm
from gpu_health.evaluator.rules.actions import CardActions
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.operations.alerts import open_alerts
from gpu_health.evaluator.store.operations.remediation import (
    AuditEntry,
    confirm_leadership,
    last_by_slurm_node,
    last_results,
    record,
    resume_candidates,
)

log = logging.getLogger(__name__)
METRIC: Final = "gpu_health_evaluator_remediation"
SlurmLabels = Callable[[], Mapping[str, str]]  # node id -> its target's slurm_node label
Rows = tuple[list[AlertRow], list[AlertRow], dict[tuple[str, str], str]]


def read_rows(db: Database, now: datetime, labels: Mapping[str, str]) -> Rows:
    """The drain and resume candidates with their last results (blocking)."""
    opened = [AlertRow(a.id, a.node_id, _gpus(a.gpu_index, a.node_gpus), a.rule_version,
                       slurm_label=labels.get(a.node_id))
              for a in open_alerts(db, now)]
    resolved = [AlertRow(aid, node, (), None, closed_by, labels.get(node))
                for aid, node, closed_by in resume_candidates(db, FINAL)]
    return opened, resolved, last_results(db, [a.alert_id for a in (*opened, *resolved)])


def _gpus(first: int | None, others: tuple[int, ...]) -> tuple[int, ...]:
    head = () if first is None else (first,)
    return (*head, *(g for g in others if g != first))


def _entry(step: Step) -> AuditEntry:
    return AuditEntry(step.action, step.result, step.alert_id, step.node_id, step.slurm_node,
                 step.why, step.gpu, step.card_action, step.reason)


class RemediationLoop:
    """Owns the Slurm client and the remediation counter."""

    def __init__(self, db: Database, config: SlurmRemediation, slurm: Slurm, *, clock: Clock,
                 registry: CollectorRegistry, actions: CardActions, actor: str,
                 labels: SlurmLabels = dict) -> None:
        self.db = db
        self.labels = labels
        self.config = config
        self.slurm = slurm
        self.clock = clock
        self.actions = actions
        self.actor = actor
        self.counter = Counter(METRIC, "Slurm remediation decisions of this evaluator, by "
                               "action (drain, resume) and result (docs/slurm.md): every "
                               "command run, and every refusal or skip when it changed",
                               ["action", "result"], registry=registry)
        mode = "dry run (remediation.slurm.dry_run)" if config.dry_run else "LIVE"
        log.warning("Slurm remediation enabled, %s: drains nodes for alerts whose card action "
                    "is one of %s", mode, ", ".join(config.actions))

    @property
    def interval(self) -> float:
        return self.config.interval

    async def tick(self) -> list[Step]:
        now = self.clock()
        opened, resolved, last = await self.db.run(read_rows, self.db, now, self.labels())
        actions = {key: rec.action for key, rec in self.actions().items()}
        # No recommended action computed yet (the /metrics snapshot's first run): drains wait
        # for the next tick rather than being audited as skipped; resumes need none.
        # sinfo every tick, even with nothing to decide: a node drained by a late call of an
        # earlier leader is repaired only if it is seen.
        cluster = await self.slurm.cluster()
        ours = cluster.ours()
        by_node = {name: LastStep(*row) for name, row in (await self.db.run(
            last_by_slurm_node, self.db, ours)).items()} if ours else {}
        # Every open alert goes in: one whose drain is final still holds its node drained.
        steps = [await self._run(s) for s in decide(
            opened, resolved, actions, cluster, self.config, last, by_node)]
        written = await self.db.run(record, self.db, now, self.actor,
                                    [_entry(s) for s in steps], last)
        ran = {(s.alert_id, s.action) for s in steps
               if s.result in ("done", "failed", "repaired")}
        for entry in written:
            if (entry.alert_id, entry.step) not in ran:
                self.counter.labels(entry.step, entry.result).inc()
            log.warning("remediation %s of %s (node %s, alert %s): %s: %s", entry.step,
                        entry.slurm_node, entry.node_id, entry.alert_id, entry.result,
                        entry.reason)
        return steps

    async def _run(self, step: Step) -> Step:
        if not step.runs:
            return step
        await self.db.run(confirm_leadership, self.db)  # fenced: a deposed leader stops here
        try:
            if step.action == DRAIN:
                await self.slurm.drain(str(step.slurm_node), str(step.reason))
            else:
                assert step.action == RESUME
                await self.slurm.resume(str(step.slurm_node))
        except CollectError as exc:
            step = replace(step, result="failed", why=f"{step.why}: {exc}"[:500])
        else:
            step = replace(step, result="repaired" if step.repair else "done")
        self.counter.labels(step.action, step.result).inc()
        return step
