"""Scrape targets and Prometheus-style target groups: validation and labelling. Pure, no I/O.

A target group is what ``static_configs``, a ``file_sd`` file and an ``http_sd`` response all
contain: ``{"targets": ["host:port", ...], "labels": {"name": "value", ...}}``. The same
validator serves the config file (errors listed at start-up) and discovery (errors logged, last
good targets kept). Labels the evaluator reads:

- ``node``: the node id of every card behind the target (fallback: the host of the address);
- ``tenant``: the node's tenant (used by the read API for per-tenant visibility);
- ``__scheme__`` (``http``/``https``) and ``__metrics_path__`` as in Prometheus.

Other labels are accepted and ignored; ``__meta_*`` labels from HTTP SD are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpu_health.evaluator.model import MAX_NODE_ID

_LABEL_NAME_RE: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_HOST_RE: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.\-_]*[A-Za-z0-9])?")
_SCHEMES: Final = ("http", "https")
SLURM_LABEL: Final = "slurm_node"  # remediation.slurm.node_name: label reads it


@dataclass(frozen=True, slots=True)
class Target:
    """One exporter endpoint and the identity of the node behind it."""

    address: str
    node_id: str
    tenant: str | None = None
    scheme: str = "http"
    metrics_path: str = "/metrics"
    slurm_node: str | None = None  # label slurm_node: the Slurm name (docs/slurm.md)
    labelled: bool = True  # node_id is the ``node`` label (else the host, until the exporter
    # names its node: evaluator/ingest/identity.py)

    @property
    def url(self) -> str:
        """Also the ``target`` label of the per-target self-metrics (unique per endpoint)."""
        return f"{self.scheme}://{self.address}{self.metrics_path}"


@dataclass(frozen=True, slots=True)
class TargetGroup:
    targets: tuple[str, ...]
    labels: tuple[tuple[str, str], ...] = ()


def split_address(address: str) -> tuple[str, int] | None:
    """``host:port`` / ``[v6]:port`` -> (host, port), or None when it is not one."""
    if address.startswith("["):
        host, sep, port = address[1:].partition("]:")
        if not sep or not host or ":" not in host:
            return None
    else:
        host, sep, port = address.rpartition(":")
        if not sep or not host or ":" in host or _HOST_RE.fullmatch(host) is None:
            return None
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def address_problem(address: object) -> str | None:
    """Why ``address`` is not a scrape target address (None when it is fine)."""
    if not isinstance(address, str) or not address:
        return f"target {address!r} must be a non-empty string 'host:port'"
    if "://" in address or "/" in address:
        return f"target {address!r} must be 'host:port' (no scheme or path; use labels " \
            "__scheme__ / __metrics_path__)"
    if len(address) > MAX_NODE_ID + 8:  # checked before the host is echoed in a message
        return (f"target of {len(address)} characters: a host longer than {MAX_NODE_ID} "
                "cannot be a node id the API can address")
    host_port = split_address(address)
    if host_port is None:
        return f"target {address!r} is not 'host:port' with a port in 1-65535"
    if len(host_port[0]) > MAX_NODE_ID:  # the host is the node id unless a label names it
        return (f"target of {len(address)} characters: a host longer than {MAX_NODE_ID} "
                "cannot be a node id the API can address")
    return None


def labels_problems(labels: object, where: str) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    if labels is None:
        return (), []
    if not isinstance(labels, Mapping):
        return (), [f"{where}.labels must be a mapping of label name to string"]
    problems: list[str] = []
    pairs: list[tuple[str, str]] = []
    for name, value in labels.items():
        if not isinstance(name, str) or _LABEL_NAME_RE.fullmatch(name) is None:
            problems.append(f"{where}.labels: {name!r} is not a valid label name")
        elif not isinstance(value, str):
            problems.append(f"{where}.labels.{name} must be a string, got {value!r}")
        elif name.startswith("__meta_"):
            continue
        else:
            pairs.append((name, value))
    found = dict(pairs)
    if found.get("__scheme__", "http") not in _SCHEMES:
        problems.append(f"{where}.labels.__scheme__ must be http or https")
    if not found.get("__metrics_path__", "/").startswith("/"):
        problems.append(f"{where}.labels.__metrics_path__ must start with '/'")
    if found.get("node", "x") == "":
        problems.append(f"{where}.labels.node must not be empty (omit it to use the host)")
    if len(found.get("node", "")) > MAX_NODE_ID:
        problems.append(f"{where}.labels.node is {len(found['node'])} characters, more than "
                        f"{MAX_NODE_ID}: the API could not address the node")
    return tuple(pairs), problems


def parse_groups(raw: object, where: str) -> tuple[list[TargetGroup], list[str]]:
    """Validate a list of target groups; returns the valid groups and every problem found."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"{where} must be a list of {{targets: [...], labels: {{...}}}}"]
    groups: list[TargetGroup] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{here} must be a mapping with 'targets' and optional 'labels'")
            continue
        unknown = sorted(str(k) for k in item if k not in ("targets", "labels"))
        problems.extend(f"{here}: unknown key {k!r}" for k in unknown)
        targets: Any = item.get("targets")
        if not isinstance(targets, list):
            problems.append(f"{here}.targets must be a list of 'host:port' strings")
            targets = []
        bad = [p for p in (address_problem(t) for t in targets) if p]
        problems.extend(f"{here}: {p}" for p in bad)
        labels, label_problems = labels_problems(item.get("labels"), here)
        problems.extend(label_problems)
        if not bad and not label_problems:
            groups.append(TargetGroup(tuple(targets), labels))
    return groups, problems


def target_from(address: str, labels: Mapping[str, str]) -> Target:
    """Build a Target from a validated address and group labels."""
    host_port = split_address(address)
    host = host_port[0] if host_port else address
    return Target(
        address=address,
        node_id=labels.get("node") or host,
        tenant=labels.get("tenant") or None,
        scheme=labels.get("__scheme__", "http"),
        metrics_path=labels.get("__metrics_path__", "/metrics"),
        slurm_node=labels.get(SLURM_LABEL) or None,
        labelled=bool(labels.get("node")),
    )


@dataclass(frozen=True, slots=True)
class Merged:
    targets: tuple[Target, ...]
    conflicts: tuple[str, ...]


def merge_groups(sources: Iterable[Sequence[TargetGroup]]) -> Merged:
    """All targets of all groups, in order, one per URL and one per node id.

    Two endpoints claiming the same node id would feed the same cards from two exporters (every
    scrape a "change", every row a lie), so the first one wins and the others are reported. The
    same endpoint listed twice with another node or tenant is reported too (the first listing
    wins): silently picking one would file a node under a tenant nobody chose.
    """
    by_url: dict[str, Target] = {}
    by_node: dict[str, str] = {}
    conflicts: list[str] = []
    for groups in sources:
        for group in groups:
            labels = dict(group.labels)
            for address in group.targets:
                target = target_from(address, labels)
                first = by_url.get(target.url)
                if first is not None:
                    if (first.node_id, first.tenant) != (target.node_id, target.tenant):
                        conflicts.append(
                            f"{target.url} listed again as node {target.node_id!r} tenant "
                            f"{target.tenant!r}: ignored, it is scraped as node "
                            f"{first.node_id!r} tenant {first.tenant!r}")
                    continue
                owner = by_node.get(target.node_id)
                if owner is not None:
                    conflicts.append(
                        f"{target.url} ignored: node {target.node_id!r} is already scraped "
                        f"from {owner}"
                    )
                    continue
                by_url[target.url] = target
                by_node[target.node_id] = target.url
    return Merged(tuple(by_url.values()), tuple(conflicts))
