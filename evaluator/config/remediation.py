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

from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.rules.actions import CHOSEN
from gpu_health.evaluator.setting_tables import Setting, Table

SLURM: Final = Table("remediation.slurm", (
    Setting("enabled", "bool", False),  # off unless switched on
    Setting("dry_run", "bool", True),  # and a dry run unless switched off
    Setting("actions", "custom", ("replace_candidate", "reset_gpu")),  # a subset of CHOSEN
    Setting("max_drained_nodes", "int", 2, 1, 100_000),
    Setting("max_drained_fraction", "custom", 0.1),  # in (0, 1]
    Setting("node_name", "custom", None),  # identity, label, or {regex, replacement}
    Setting("scontrol", "string", "scontrol"),
    Setting("sinfo", "string", "sinfo"),
    Setting("timeout", "duration", 10.0),
    Setting("interval", "duration", 30.0),
))
DEFAULT_ACTIONS: Final[tuple[str, ...]] = SLURM.defaults["actions"]


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
    enabled: bool = SLURM.defaults["enabled"]
    dry_run: bool = SLURM.defaults["dry_run"]
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    max_drained_nodes: int = SLURM.defaults["max_drained_nodes"]
    max_drained_fraction: float = SLURM.defaults["max_drained_fraction"]
    naming: NodeNaming = NodeNaming()  # node_name
    scontrol: str = SLURM.defaults["scontrol"]
    sinfo: str = SLURM.defaults["sinfo"]
    timeout: float = SLURM.defaults["timeout"]
    interval: float = SLURM.defaults["interval"]


def parse_remediation(c: Checker, raw: Mapping[str, Any]) -> SlurmRemediation:
    """``remediation.slurm``; defaults stand in for bad values, every problem is listed."""
    outer = c.section(raw, "remediation", ("slurm",))
    section = c.section(outer, "slurm", SLURM.keys, "remediation.slurm") if outer else {}
    actions = tuple(c.string_list(section, "actions", "remediation.slurm.actions")
                    if "actions" in section else DEFAULT_ACTIONS)
    for action in actions:
        if action not in CHOSEN:
            c.problem(f"remediation.slurm.actions: {action!r} is not one of {', '.join(CHOSEN)}")
    default = SLURM.defaults["max_drained_fraction"]
    fraction = section.get("max_drained_fraction", default)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
            or not 0 < fraction <= 1:
        c.problem("remediation.slurm.max_drained_fraction must be a number in (0, 1]")
        fraction = default
    return SlurmRemediation(
        actions=actions,
        max_drained_fraction=float(fraction),
        naming=_naming(c, section.get("node_name")),
        **SLURM.read(c, section),
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
