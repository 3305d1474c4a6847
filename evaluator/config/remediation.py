"""The ``remediation`` section of the evaluator config: the opt-in Slurm drain (docs/slurm.md).

Off unless ``remediation.slurm.enabled`` is true, and a dry run (log, count and audit what it
would do, touch nothing) unless ``dry_run`` is false: a drain takes capacity away, so each step
towards it is an explicit decision. Every problem is recorded in the shared Checker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from evaluator.config.values import Checker
from evaluator.rules.actions import CHOSEN

DEFAULT_ACTIONS: Final = ("replace_candidate", "reset_gpu")
_KEYS: Final = ("enabled", "dry_run", "actions", "max_drained_nodes", "max_drained_fraction",
                "node_name", "scontrol", "sinfo", "timeout", "interval")


@dataclass(frozen=True, slots=True)
class NodeNaming:
    """How an evaluator node id becomes a Slurm node name: identity (``pattern`` None), the
    full match of ``pattern`` rewritten by ``replacement`` (``re`` syntax, ``\\1``), or
    (``label``) the scrape target's ``slurm_node`` label."""

    pattern: str | None = None
    replacement: str = r"\1"
    label: bool = False

    def slurm_name(self, node_id: str, labelled: str | None = None) -> str | None:
        """The Slurm node name, or None when the pattern does not match or the label is
        missing (``labelled``: the target's ``slurm_node`` label)."""
        if self.label:
            return labelled
        if self.pattern is None:
            return node_id
        match = re.fullmatch(self.pattern, node_id)
        return None if match is None else match.expand(self.replacement)


@dataclass(frozen=True, slots=True)
class SlurmRemediation:
    enabled: bool = False
    dry_run: bool = True
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    max_drained_nodes: int = 2
    max_drained_fraction: float = 0.1
    naming: NodeNaming = NodeNaming()
    scontrol: str = "scontrol"
    sinfo: str = "sinfo"
    timeout: float = 10.0
    interval: float = 30.0


def parse_remediation(c: Checker, raw: Mapping[str, Any]) -> SlurmRemediation:
    """``remediation.slurm``; defaults stand in for bad values, every problem is listed."""
    outer = c.section(raw, "remediation", ("slurm",))
    section = c.section(outer, "slurm", _KEYS, "remediation.slurm") if outer else {}
    d = SlurmRemediation()
    actions = tuple(c.string_list(section, "actions", "remediation.slurm.actions")
                    if "actions" in section else DEFAULT_ACTIONS)
    for action in actions:
        if action not in CHOSEN:
            c.problem(f"remediation.slurm.actions: {action!r} is not one of {', '.join(CHOSEN)}")
    fraction = section.get("max_drained_fraction", d.max_drained_fraction)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
            or not 0 < fraction <= 1:
        c.problem("remediation.slurm.max_drained_fraction must be a number in (0, 1]")
        fraction = d.max_drained_fraction
    return SlurmRemediation(
        enabled=c.boolean(section, "enabled", "remediation.slurm.enabled", d.enabled),
        dry_run=c.boolean(section, "dry_run", "remediation.slurm.dry_run", d.dry_run),
        actions=actions,
        max_drained_nodes=c.integer(section, "max_drained_nodes",
                                    "remediation.slurm.max_drained_nodes",
                                    d.max_drained_nodes, 1, 100_000),
        max_drained_fraction=float(fraction),
        naming=_naming(c, section.get("node_name")),
        scontrol=c.string(section, "scontrol", "remediation.slurm.scontrol", d.scontrol),
        sinfo=c.string(section, "sinfo", "remediation.slurm.sinfo", d.sinfo),
        timeout=c.duration(section, "timeout", "remediation.slurm.timeout", d.timeout),
        interval=c.duration(section, "interval", "remediation.slurm.interval", d.interval),
    )


def _naming(c: Checker, raw: object) -> NodeNaming:
    where = "remediation.slurm.node_name"
    if raw is None or raw == "identity":
        return NodeNaming()
    if raw == "label":
        return NodeNaming(label=True)
    if not isinstance(raw, Mapping):
        c.problem(f"{where} must be identity, label, or a mapping with regex and replacement")
        return NodeNaming()
    c.unknown_keys(raw, ("regex", "replacement"), where)
    pattern = raw.get("regex")
    replacement = raw.get("replacement", r"\1")
    try:
        compiled = re.compile(str(pattern))
        if not isinstance(pattern, str) or not isinstance(replacement, str):
            raise re.error("regex and replacement must be strings")
        if compiled.groups < max((int(g) for g in re.findall(r"\\(\d+)", replacement)),
                                 default=0):
            raise re.error("the replacement names a group the regex does not have")
    except re.error as exc:
        c.problem(f"{where}: {exc}")
        return NodeNaming()
    return NodeNaming(pattern, replacement)
