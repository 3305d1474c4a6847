"""One chunk of range-query results -> per step, the scrape results the ingestor takes (pure).

The ingestor (write rule, dedup, keepalive, XID rows, node records) is the scrape path's own;
this module only reshapes what Prometheus answered into what a scrape of every node at that
step would have given: one :class:`ScrapeResult` per node, its cards sorted by index. A node
stands for a "target" whose URL is ``<prometheus URL>#<node>`` (the ``target`` column of the
node record, the ``url`` on ``/targets``). A card with no value at a step is simply not in
that step (unknown, a gap: never zeros); a card whose five counters are unknown but whose XID
counts are known is in it with its XID counts, as in a scrape. A node's SXid counts at a step
go in its result (a node with SXid counts and no card reading gets a result without cards).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from urllib.parse import urlsplit

from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cards import CardExtraction, CardReading
from gpu_health.evaluator.ingest.prometheus.assembly import Assembly, readings
from gpu_health.evaluator.ingest.prometheus.metricsets import MetricSet
from gpu_health.evaluator.ingest.prometheus.xids import XidReadings
from gpu_health.evaluator.ingest.scrape import ScrapeResult
from gpu_health.evaluator.model import CardKey, Counters


def node_targets(base_url: str) -> Callable[[str, str | None], Target]:
    """(node, tenant) -> the node's pseudo-target (cached: one object per node and tenant)."""
    parts = urlsplit(base_url.rstrip("/"))
    cache: dict[tuple[str, str | None], Target] = {}

    def target(node: str, tenant: str | None) -> Target:
        found = cache.get((node, tenant))
        if found is None:
            found = cache[(node, tenant)] = Target(
                address=parts.netloc, node_id=node, tenant=tenant, scheme=parts.scheme,
                metrics_path=f"{parts.path}#{node}")
        return found

    return target


def step_results(acc: Assembly, ms: MetricSet, xids: XidReadings,
                 target: Callable[[str, str | None], Target],
                 tenants: Mapping[str, str]) -> list[tuple[datetime, list[ScrapeResult]]]:
    """(step, one result per node) in time order."""
    cards: dict[datetime, dict[CardKey, CardReading]] = {}
    nodes_at: dict[datetime, dict[str, list[CardReading]]] = {}
    for node, sxid_times in acc.sxids.items():
        for at in sxid_times:
            nodes_at.setdefault(at, {})[node] = []
    for key, uuid, at, counters, details in readings(acc, ms):
        known = xids.get(key, {}).pop(at, None)
        cards.setdefault(at, {})[key] = CardReading(
            key.gpu_index, uuid, counters,
            tuple(sorted(known[1].items())) if known and known[0] == uuid else (), details)
    for key, times in xids.items():  # XID counts of cards without a counter reading
        for at, (uuid, counts) in times.items():
            cards.setdefault(at, {}).setdefault(key, CardReading(
                key.gpu_index, uuid, Counters(), tuple(sorted(counts.items()))))
    for at, found in cards.items():
        nodes = nodes_at.setdefault(at, {})
        for key, card in found.items():
            nodes.setdefault(key.node_id, []).append(card)
    out: list[tuple[datetime, list[ScrapeResult]]] = []
    for at in sorted(nodes_at):
        out.append((at, [
            ScrapeResult(target(node, tenants.get(node)), at, 0.0, CardExtraction(
                tuple(sorted(found, key=lambda c: c.gpu_index)),
                sxids=tuple(sorted(acc.sxids.get(node, {}).get(at, {}).items()))))
            for node, found in sorted(nodes_at[at].items())]))
    return out
