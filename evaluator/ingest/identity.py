"""Which node a scrape result belongs to (pure).

A target's node is its ``node`` label; without one it is the host of its address, a guess that
DNS discovery makes useless (it finds addresses, not names). An exporter told its node's name
(``--node-name`` or ``$NODE_NAME``: the chart fills it from ``spec.nodeName``) exports it as
``gpu_health_node_info{node}``; for a target without a ``node`` label that name is the node.

Two targets claiming one node in a cycle would write one node's cards from two exporters: a
labelled target keeps its node, then the first by address; every other claimant is a failed
result (``duplicate_node``, listed at /targets), never a silent merge.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.scrape import ScrapeResult

DUPLICATE = "duplicate_node"


def named(result: ScrapeResult) -> ScrapeResult:
    """``result`` with its target named after the exporter's own node name, where the target
    has no ``node`` label and the exporter said one."""
    name = result.extraction.node_name
    target = result.target
    if not result.ok or target.labelled or name is None or name == target.node_id:
        return result
    return replace(result, target=replace(target, node_id=name))


def resolve_nodes(results: Sequence[ScrapeResult]) -> list[ScrapeResult]:
    """Every result named (:func:`named`), in the same order; claimants of a node already taken
    this cycle turned into failed results."""
    resolved = [named(r) for r in results]
    order = sorted((i for i, r in enumerate(resolved) if r.ok),
                   key=lambda i: (not resolved[i].target.labelled, resolved[i].target.url))
    owner: dict[str, str] = {}
    for i in order:
        r = resolved[i]
        first = owner.setdefault(r.target.node_id, r.target.url)
        if first != r.target.url:
            resolved[i] = replace(r, error_reason=DUPLICATE,
                                  error=f"node {r.target.node_id!r} is already scraped from "
                                        f"{first} this cycle")
    return resolved


class NodeNames:
    """The node names exporters gave, by target URL (targets without a ``node`` label only),
    learned from each cycle's results, so everything that names nodes from the discovered
    targets (which nodes are present, who may see them, Slurm names, HA shares) uses the
    exporter's name too, not the address. Bounded by the current targets."""

    def __init__(self) -> None:
        self._by_url: dict[str, str] = {}
        self.version = 0  # changes whenever a name does

    def apply(self, targets: Sequence[Target]) -> tuple[Target, ...]:
        by_url = self._by_url
        if not by_url:
            return tuple(targets)
        return tuple(replace(t, node_id=by_url[t.url])
                     if not t.labelled and t.url in by_url else t for t in targets)

    def learn(self, results: Sequence[ScrapeResult], current: Collection[str]) -> None:
        """Take the names of this cycle's answers; a target that answered without a name
        loses its old one; a target that did not answer keeps it (a down exporter's node is
        still the same node); targets no longer discovered are forgotten."""
        before = dict(self._by_url)
        for r in results:
            if r.ok and not r.target.labelled:
                if r.extraction.node_name is None:
                    self._by_url.pop(r.target.url, None)
                else:
                    self._by_url[r.target.url] = r.extraction.node_name
        for url in [u for u in self._by_url if u not in current]:
            del self._by_url[url]
        if self._by_url != before:
            self.version += 1
