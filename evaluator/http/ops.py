"""HTTP endpoints about the evaluator itself, each with its access rule (docs/security.md).

- ``/metrics`` (public): the process's own metrics; in the open mode (no tokens file and a
  loopback listener) also every series with node data;
- ``/healthz`` (public): 503 only when a loop with a liveness limit (ingest:
  ``max(3 x interval + timeout, 5 min)``) has not finished a tick within it;
- ``/readyz`` (public): 200 when every readiness check passes, else 503 with the reasons;
- ``/targets`` (nodes:read): the caller's tenants' targets with their last scrape; discovery
  conflicts and errors only for an all-tenants caller. With a Prometheus source each node seen
  in the last hour of data is a "target" (``<prometheus URL>#<node>``, ``up`` when it has a
  reading at the newest step read) and ``source`` describes the source (all-tenants callers);
- ``/api/v1/gpu-health/metrics`` (nodes:read): ``/metrics`` plus the series with node data of
  the caller's nodes (what Prometheus scrapes with a token when a tokens file is configured).

A series carries node data when it has a ``node`` label or a ``target`` label (a target URL is
a node's address). Series without either that live on the node registry (fleet-wide counts and
ratios over every tenant's nodes) are shown only to an all-tenants caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric

from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.http.access import PRINCIPAL, Rule, allow
from gpu_health.evaluator.http.api.auth import Principal
from gpu_health.evaluator.ingest.scrape import ScrapeResult

NODE_METRICS_PATH: Final = "/api/v1/gpu-health/metrics"


class OpsHost(Protocol):
    """What the operator endpoints read from the process host (``gpu_health.evaluator.app``)."""

    registry: CollectorRegistry
    node_registry: CollectorRegistry
    open_mode: bool

    def readiness(self) -> dict[str, str | None]: ...

    def facts(self) -> dict[str, object]: ...

    def stuck_loop(self) -> str | None: ...


def _metrics_response(body: bytes) -> web.Response:
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def add_ops_routes(app: web.Application, host: OpsHost) -> None:
    async def metrics(_request: web.Request) -> web.Response:
        shown: list[CollectorRegistry] = [host.registry]
        if host.open_mode:
            shown.append(host.node_registry)
        return _metrics_response(await asyncio.to_thread(render, shown))

    async def healthz(_request: web.Request) -> web.Response:
        problem = host.stuck_loop()
        return web.json_response({"ok": problem is None, "problem": problem},
                                 status=503 if problem else 200)

    async def readyz(_request: web.Request) -> web.Response:
        failing = {k: v for k, v in host.readiness().items() if v}
        return web.json_response({"ready": not failing, "not_ready": failing, **host.facts()},
                                 status=503 if failing else 200)

    for path, handler in (("/metrics", metrics), ("/healthz", healthz), ("/readyz", readyz)):
        app.router.add_get(path, handler)
        allow(app, path, Rule.PUBLIC)


class _Shown:
    """A registry view keeping only the samples ``keep`` allows (families stay, maybe empty)."""

    def __init__(self, registries: Iterable[CollectorRegistry],
                 keep: Callable[[Mapping[str, str]], bool]) -> None:
        self.registries, self.keep = list(registries), keep

    def collect(self) -> Iterable[Metric]:
        for registry in self.registries:
            for family in registry.collect():
                copy = Metric(family.name, family.documentation, family.type, family.unit)
                copy.samples = [s for s in family.samples if self.keep(s.labels)]
                yield copy


def render(registries: Iterable[CollectorRegistry],
           keep: Callable[[Mapping[str, str]], bool] | None = None) -> bytes:
    """The text exposition of ``registries``; with ``keep``, only the samples it allows (the
    unfiltered path renders the registries as they are, copying nothing)."""
    if keep is None:
        return b"".join(generate_latest(registry) for registry in registries)
    return generate_latest(_Shown(registries, keep))


@dataclass(frozen=True)
class NodeViews:
    """Where node data comes from: the targets page's parts, and which nodes a caller sees."""

    targets: Callable[[], tuple[Sequence[Target], Mapping[str, ScrapeResult],
                                Sequence[str], Mapping[str, str]]]
    visible: Callable[[Principal], Awaitable[frozenset[str]]]  # only for callers with tenants
    target_nodes: Callable[[], Mapping[str, str]]  # target URL -> node id, now
    source: Callable[[], Mapping[str, Any]] | None = None  # a Prometheus source's state
    # Several evaluators (docs/ha.md): (target URL -> the member that scrapes it, this member).
    scraper_of: tuple[Callable[[str], str | None], str] | None = None


def add_node_routes(app: web.Application, host: OpsHost, views: NodeViews) -> None:
    """``/targets`` and the authenticated metrics path, filtered to the caller's nodes."""

    async def targets(request: web.Request) -> web.Response:
        principal = request[PRINCIPAL]
        listed, results, conflicts, errors = views.targets()
        full = principal.tenants is None
        mine = [t for t in listed if full or (t.tenant is not None
                                              and t.tenant in (principal.tenants or ()))]
        body: dict[str, Any] = {
            "targets": [target_row(t, results.get(t.url), views.scraper_of) for t in mine],
            "discovery_conflicts": list(conflicts) if full else [],
            "discovery_errors": dict(errors) if full else {},
        }
        if views.source is not None and full:
            body["source"] = dict(views.source())
        return web.json_response(body)

    async def node_metrics(request: web.Request) -> web.Response:
        principal = request[PRINCIPAL]
        keep = None if principal.tenants is None else _keeper(
            await views.visible(principal), views.target_nodes())
        return _metrics_response(await asyncio.to_thread(
            lambda: render([host.registry]) + render([host.node_registry], keep)))

    app.router.add_get("/targets", targets)
    allow(app, "/targets", Rule.NODES_READ)
    app.router.add_get(NODE_METRICS_PATH, node_metrics)
    allow(app, NODE_METRICS_PATH, Rule.NODES_READ)


def _keeper(visible: frozenset[str],
            target_nodes: Mapping[str, str]) -> Callable[[Mapping[str, str]], bool]:
    def keep(labels: Mapping[str, str]) -> bool:
        node = labels.get("node")
        if node is None and "target" in labels:
            node = target_nodes.get(labels["target"])
        return node is not None and node in visible

    return keep


def target_row(target: Target, result: ScrapeResult | None,
               scraper_of: tuple[Callable[[str], str | None], str] | None = None
               ) -> dict[str, Any]:
    """One target's row. With several evaluators the row names the member that scrapes it; on
    the others ``up`` is null with a note saying where its status is (their own last result, if
    any, is from before the target moved and would be stale)."""
    row: dict[str, Any] = {"url": target.url, "node": target.node_id, "tenant": target.tenant}
    if scraper_of is not None:
        member, me = scraper_of[0](target.url), scraper_of[1]
        row["scraped_by"] = member
        if member != me:
            row["up"] = None
            row["note"] = (f"scraped by evaluator {member}: its /targets shows this target's "
                           "status")
            return row
    if result is None:
        row["up"] = None
        return row
    row.update(
        up=result.ok,
        last_scrape=result.scraped_at.isoformat(),
        duration_seconds=round(result.duration, 6),
        cards=len(result.extraction.cards),
        error_reason=result.error_reason,
        error=result.error,
    )
    return row


class SourceView(Protocol):
    """What the targets page reads from a Prometheus source
    (``gpu_health.evaluator.ingest.prometheus.source``)."""

    def target_view(self) -> tuple[Sequence[Target], Mapping[str, ScrapeResult]]: ...

    def describe(self) -> Mapping[str, Any]: ...


def source_views(source: SourceView,
                 stored: Callable[[Principal], Awaitable[frozenset[str]]]) -> NodeViews:
    """The targets page and node visibility of a Prometheus source: its nodes are the targets,
    a caller sees the nodes the store or the source's tenant label files under its tenants."""

    async def visible(principal: Principal) -> frozenset[str]:
        tenants = principal.tenant_list or []
        listed, _ = source.target_view()
        return await stored(principal) | {t.node_id for t in listed if t.tenant in tenants}

    def targets() -> tuple[Sequence[Target], Mapping[str, ScrapeResult], Sequence[str],
                           Mapping[str, str]]:
        listed, results = source.target_view()
        return listed, results, (), {}

    return NodeViews(targets=targets, visible=visible,
                     target_nodes=lambda: {t.url: t.node_id
                                           for t in source.target_view()[0]},
                     source=source.describe)
