"""When to drain a Slurm node for a GPU_FAULT_PREDICTED alert, and when to resume it. Pure.

Inputs are plain rows (the open alerts, the alerts an operator closed after we drained, each
card's recommended action, the last audited result per alert and step) and a :class:`SlurmCluster`
read from ``sinfo``; the output is one :class:`Step` per alert that needs a word, in order. The
safety rules (docs/slurm.md):

- only real alerts (simulated data never opens one) whose card's recommended action is in
  ``actions``; only a node Slurm knows and that is schedulable (never one drained, down or not
  responding for another reason: ``refused_foreign``);
- at most ``max_drained_nodes`` nodes drained by us at once, and in every partition of the node
  at most ``max(1, floor(max_drained_fraction * size))`` (``refused_cap``);
- a dry run decides the same and does nothing (``dry_run``, final for that alert);
- resume only a node whose alert an operator resolved (closed by ``system``, node removed, it
  stays drained: ``kept``) and whose reason is still ours (``refused_foreign``); a node no
  longer drained is left alone (``not_drained``);
- drains and resumes are decided together: a node that another open alert keeps drained (its
  drain done or ours already, or decided in this tick) is not resumed (``kept``), so an
  operator resolving one alert while a new one opens on the node leaves it drained for the
  new one; the new alert's own resolve resumes it;
- repair: a node drained with our reason that no open alert holds, whose last audited step is
  our resume, was drained again by a call that completed after it (an earlier leader's, its
  lease lost while ``scontrol`` ran): it is resumed again (``repaired``).

A step is *final* when its result is; a final step is never decided again for that alert.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from gpu_health.evaluator.config.remediation import SlurmRemediation
from gpu_health.evaluator.model import CardSlot
from gpu_health.evaluator.remediation.slurm import SlurmCluster, SlurmNode, drain_reason

DRAIN, RESUME = "drain", "resume"
# Results after which the alert's step is never decided again.
FINAL: Final = frozenset(("done", "already_ours", "dry_run", "refused_foreign", "kept",
                          "not_drained"))
RESULTS: Final = (*sorted(FINAL), "refused_cap", "skipped_action", "unknown_node", "failed",
                  "repaired")
# Drain results after which the node is drained for that alert (while it is open).
HOLDING: Final = frozenset(("done", "already_ours"))


@dataclass(frozen=True, slots=True)
class AlertRow:
    """What the policy needs of one alert (open, or closed after a drain of ours)."""

    alert_id: str
    node_id: str
    gpus: tuple[int, ...]  # the card that opened it first, then the node's other live cards
    rule_version: str | None
    closed_by: str | None = None  # None while open; "system" when the node was removed
    slurm_label: str | None = None  # the scrape target's slurm_node label, if any


@dataclass(frozen=True, slots=True)
class Step:
    alert_id: str
    node_id: str
    action: str  # drain | resume
    result: str  # one of RESULTS; "go" while the command is still to run
    slurm_node: str | None
    why: str
    gpu: int | None = None
    card_action: str | None = None
    reason: str | None = None  # the Slurm reason to set (drain only)
    repair: bool = False  # undoes a late call: audited "repaired" once it ran

    @property
    def runs(self) -> bool:
        return self.result == "go"


def decide(open_alerts: Sequence[AlertRow], resolved: Sequence[AlertRow],
           actions: Mapping[CardSlot, str], cluster: SlurmCluster, config: SlurmRemediation,
           done: Mapping[tuple[str, str], str],
           last_by_node: Mapping[str, LastStep] | None = None) -> list[Step]:
    """Steps for every alert whose drain (open) or resume (resolved) is not final yet, then
    the repairs of late calls (``last_by_node``: the newest audited step per Slurm node)."""
    steps: list[Step] = []
    ours = set(cluster.ours())
    held: set[str | None] = set()  # Slurm names an open alert keeps drained
    for alert in open_alerts:
        last = done.get((alert.alert_id, DRAIN))
        if last in HOLDING:
            held.add(config.naming.slurm_name(alert.node_id, alert.slurm_label))
        if last in FINAL or not actions:  # no card actions computed yet: drains wait
            continue
        step = _drain(alert, actions, cluster, config, ours)
        if step.runs or step.result in ("dry_run",):
            ours.add(str(step.slurm_node))  # counts against the cap for the next alert
        if step.runs or step.result in HOLDING:
            held.add(step.slurm_node)
        steps.append(step)
    for alert in resolved:
        if done.get((alert.alert_id, RESUME)) not in FINAL:
            steps.append(_resume(alert, cluster, config, held))
    resuming = {s.slurm_node for s in steps if s.action == RESUME}
    return steps + _repairs(cluster, held | resuming, last_by_node or {}, config)


@dataclass(frozen=True, slots=True)
class LastStep:
    """The newest audited step of a Slurm node."""

    alert_id: str
    node_id: str
    step: str
    result: str


def _repairs(cluster: SlurmCluster, held: set[str | None], last_by_node: Mapping[str, LastStep],
             config: SlurmRemediation) -> list[Step]:
    """Resume a node that carries our drain reason although our last word on it was a resume
    and no open alert holds it: a drain that completed after that resume."""
    steps: list[Step] = []
    if config.dry_run:  # a dry run changes nothing, repairs included
        return steps
    for name in sorted(cluster.ours()):
        last = last_by_node.get(name)
        if name in held or last is None or last.step != RESUME or \
                last.result not in ("done", "not_drained", "repaired"):
            continue
        why = (f"repair: drained again with our reason ({cluster.nodes[name].reason}) after "
               "its resume, by a call that completed late (an earlier leader's): resume")
        steps.append(Step(last.alert_id, last.node_id, RESUME, "go", name, why, repair=True))
    return steps


def _card(alert: AlertRow, actions: Mapping[CardSlot, str],
          wanted: Sequence[str]) -> tuple[int | None, str | None]:
    """The first card of the alert whose action is in ``wanted`` (else the first card's)."""
    named = [(g, actions.get((alert.node_id, g))) for g in alert.gpus]
    for gpu, action in named:
        if action in wanted:
            return gpu, action
    return named[0] if named else (None, None)


def _drain(alert: AlertRow, actions: Mapping[CardSlot, str], cluster: SlurmCluster,
           config: SlurmRemediation, ours: set[str]) -> Step:
    gpu, action = _card(alert, actions, config.actions)
    name = config.naming.slurm_name(alert.node_id, alert.slurm_label)
    node = cluster.nodes.get(name) if name is not None else None

    def step(result: str, why: str, reason: str | None = None) -> Step:
        return Step(alert.alert_id, alert.node_id, DRAIN, result, name, why, gpu, action, reason)

    if action not in config.actions:
        return step("skipped_action", f"the card's recommended action is {action or 'unknown'}"
                                      f", not one of {', '.join(config.actions)}")
    if node is None:
        return step("unknown_node", _no_node(alert, name, config))
    if node.ours:
        return step("already_ours", f"already drained by gpu-health: {node.reason}")
    if not node.schedulable:
        return step("refused_foreign", f"node is {node.state} for another reason: "
                                       f"{node.reason or 'no reason given'}")
    capped = _cap(node, cluster, config, ours)
    if capped is not None:
        return step("refused_cap", capped)
    reason = drain_reason(alert.rule_version, gpu, str(action))
    if config.dry_run:
        return step("dry_run", f"would drain with reason {reason!r} (remediation.slurm.dry_run)",
                    reason)
    return step("go", f"drain with reason {reason!r}", reason)


def _cap(node: SlurmNode, cluster: SlurmCluster, config: SlurmRemediation,
         ours: set[str]) -> str | None:
    if len(ours) >= config.max_drained_nodes:
        return (f"{len(ours)} nodes already drained by gpu-health "
                f"(max_drained_nodes {config.max_drained_nodes})")
    for partition in sorted(node.partitions):
        size = cluster.partition_size(partition)
        allowed = max(1, math.floor(config.max_drained_fraction * size))
        mine = sum(partition in cluster.nodes[n].partitions for n in ours if n in cluster.nodes)
        if mine >= allowed:
            return (f"partition {partition}: {mine} of {size} nodes already drained by "
                    f"gpu-health (max_drained_fraction {config.max_drained_fraction:g} allows "
                    f"{allowed})")
    return None


def _resume(alert: AlertRow, cluster: SlurmCluster, config: SlurmRemediation,
            held: set[str | None]) -> Step:
    name = config.naming.slurm_name(alert.node_id, alert.slurm_label)
    node = cluster.nodes.get(name) if name is not None else None

    def step(result: str, why: str) -> Step:
        return Step(alert.alert_id, alert.node_id, RESUME, result, name, why)

    if name is not None and name in held:
        return step("kept", "another open alert on the node needs it drained: it stays "
                            "drained until that alert is resolved too")
    if alert.closed_by == "system":
        return step("kept", "the alert closed because the node left the scrape targets, not "
                            "by an operator: the node stays drained")
    if node is None:
        return step("unknown_node", _no_node(alert, name, config))
    if node.base_state not in ("drained", "draining"):
        return step("not_drained", f"node is {node.state}: someone resumed it already")
    if not node.ours:
        return step("refused_foreign", f"the drain reason is no longer ours: {node.reason}")
    if config.dry_run:
        return step("dry_run", "would resume (remediation.slurm.dry_run)")
    return step("go", f"resume: alert resolved by {alert.closed_by}")


def _no_node(alert: AlertRow, name: str | None, config: SlurmRemediation) -> str:
    if name is not None:
        return f"Slurm has no node {name!r} (the Slurm name of {alert.node_id!r})"
    if config.naming.label:
        return f"the scrape target of {alert.node_id!r} has no slurm_node label"
    return f"node_name's regex does not match {alert.node_id!r}"
