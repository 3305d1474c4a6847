"""Slurm, as the drain policy sees it: ``sinfo`` read into a :class:`SlurmCluster` (pure parser) and
``scontrol update`` run through the shared tool runner (argv, no shell, ``LC_ALL=C``, timeout,
bounded output). The only module of the evaluator that talks to Slurm.

``sinfo -h -N -o '%N|%T|%P|%E'`` prints one line per node and partition: the node name, its
long state (``idle``, ``mixed``, ``allocated``, ``drained``, ``draining``, ``down*``, ...; a
trailing ``*`` means not responding), the partition (``*`` marks the default) and the reason,
last because it is free text that may hold ``|`` (Slurm 22.05.8, Debian 12). A reason of
``none`` is no reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from gpu_health.errors import CollectError
from gpu_health.runner import ToolRunner

SINFO_ARGS: Final = ("-h", "-N", "-o", "%N|%T|%P|%E")
OUR_PREFIX: Final = "gpu-health:"
MAX_REASON: Final = 120
MAX_OUTPUT: Final = 16 * 1024 * 1024  # sinfo for 100,000 nodes is ~6 MB
# Long states a job can be placed on: the only ones a drain may start from.
SCHEDULABLE: Final = frozenset(("idle", "mixed", "allocated", "completing", "planned"))
DRAINED: Final = frozenset(("drained", "draining"))


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    state: str  # sinfo's long state, flags kept (``idle*``)
    reason: str | None
    partitions: frozenset[str] = frozenset()

    @property
    def base_state(self) -> str:
        return self.state.rstrip("*~#!%$@^-+")

    @property
    def responding(self) -> bool:
        return not self.state.endswith("*")

    @property
    def ours(self) -> bool:
        """Drained (or draining) with a reason this evaluator wrote."""
        return self.base_state in DRAINED and (self.reason or "").startswith(OUR_PREFIX)

    @property
    def schedulable(self) -> bool:
        return self.base_state in SCHEDULABLE and self.responding


@dataclass(frozen=True, slots=True)
class SlurmCluster:
    nodes: Mapping[str, SlurmNode] = field(default_factory=dict)

    def partition_size(self, partition: str) -> int:
        return sum(partition in n.partitions for n in self.nodes.values())

    def ours(self) -> frozenset[str]:
        return frozenset(n.name for n in self.nodes.values() if n.ours)


def parse_sinfo(text: str) -> SlurmCluster:
    """The nodes of ``sinfo -h -N -o '%N|%T|%P|%E'`` (lines that do not parse are skipped)."""
    nodes: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        parts = line.split("|", 3)
        if len(parts) != 4 or not parts[0]:
            continue
        name, state, partition, reason = parts
        partition = partition.rstrip("*")
        known = nodes.get(name)
        partitions = (known.partitions if known else frozenset()) | {partition}
        nodes[name] = SlurmNode(name, state, None if reason in ("", "none") else reason,
                                partitions)
    return SlurmCluster(nodes)


def drain_reason(rule_version: str | None, gpu: int | None, action: str) -> str:
    """Our reason: it marks the drain as ours (prefix) and says why in a few words."""
    card = "gpu?" if gpu is None else f"gpu{gpu}"
    text = f"{OUR_PREFIX} {rule_version or 'unknown-rule'} {card} {action}"
    return text[:MAX_REASON]


class Slurm:
    """Runs ``sinfo`` and ``scontrol update`` (each bounded by ``timeout_s``) off the loop."""

    def __init__(self, *, sinfo: str, scontrol: str, timeout_s: float,
                 env: Mapping[str, str]) -> None:
        self.sinfo_cmd = sinfo
        self.scontrol_cmd = scontrol
        self.runner = ToolRunner(timeout_s=timeout_s, max_output_bytes=MAX_OUTPUT, env=env)

    async def cluster(self) -> SlurmCluster:
        result = await asyncio.to_thread(self.runner.run, self.sinfo_cmd, SINFO_ARGS)
        return parse_sinfo(result.require_success().stdout)

    async def drain(self, node: str, reason: str) -> None:
        await self._update(f"NodeName={node}", "State=DRAIN", f"Reason={reason}")

    async def resume(self, node: str) -> None:
        await self._update(f"NodeName={node}", "State=RESUME")

    async def _update(self, *args: str) -> None:
        result = await asyncio.to_thread(self.runner.run, self.scontrol_cmd, ("update", *args))
        result.require_success()


__all__ = ("CollectError", "Slurm", "SlurmCluster", "SlurmNode", "drain_reason", "parse_sinfo")
