"""Wires the opt-in Slurm remediation loop (docs/slurm.md) into the app: leader only, off unless
``remediation.slurm.enabled``, reading the recommended actions the /metrics snapshot computes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gpu_health.clock import Clock
from gpu_health.evaluator.app import EvaluatorApp
from gpu_health.evaluator.config.file import Config
from gpu_health.evaluator.ingest.discovery import Discovery
from gpu_health.evaluator.remediation.drain_loop import RemediationLoop, SlurmLabels
from gpu_health.evaluator.remediation.slurm import Slurm
from gpu_health.evaluator.rules.actions import CardActions
from gpu_health.evaluator.store.db import Database

log = logging.getLogger(__name__)
# A leader-only tick runner (compose._leader_only): every leader-only loop goes through it.
Lead = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


def remediation_loop(config: Config, app: EvaluatorApp, db: Database, clock: Clock, *,
                     actions: CardActions | None, lead: Lead, member: str,
                     environ: Mapping[str, str],
                     discovery: Discovery | None) -> RemediationLoop | None:
    slurm = config.remediation
    if not slurm.enabled:
        return None
    if actions is None:
        log.error("remediation.slurm is enabled but no recommended-action policy is loaded: "
                  "no node is drained (every card's action is unknown)")
        return None
    loop = RemediationLoop(
        db, slurm, Slurm(sinfo=slurm.sinfo, scontrol=slurm.scontrol, timeout_s=slurm.timeout,
                         env=environ),
        clock=clock, registry=app.registry, actions=actions, actor=f"evaluator {member}",
        labels=_labels(discovery))
    app.add_loop("remediation", loop.interval, lambda: lead(loop.tick))
    return loop


def _labels(discovery: Discovery | None) -> SlurmLabels:
    """node id -> the slurm_node label of its scrape target (none with a Prometheus source)."""
    def labels() -> dict[str, str]:
        if discovery is None:
            return {}
        return {t.node_id: t.slurm_node for t in discovery.targets if t.slurm_node}

    return labels
