"""HTTP endpoints about the evaluator itself: /metrics, /healthz, /readyz, /targets.

- ``/metrics``: the process's CollectorRegistry in the Prometheus text format;
- ``/healthz``: liveness; 503 only when a loop with a liveness limit (the ingest loop:
  ``max(3 x interval + timeout, 5 min)``) has not finished a tick, successful or not, within
  it, i.e. it is stuck, not merely failing;
- ``/readyz``: 200 when every readiness check passes (store open, discovery has produced a
  target list from every source, plus the checks other parts add), else 503 with the reasons;
- ``/targets``: every target with its last scrape result and error text (for operators).

Errors of these handlers take the one error path (:mod:`evaluator.http.errors`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from evaluator.config.targets import Target
from evaluator.ingest.scrape import ScrapeResult


class OpsHost(Protocol):
    """What the operator endpoints read from the process host (``evaluator.app``)."""

    registry: CollectorRegistry

    def readiness(self) -> dict[str, str | None]: ...

    def stuck_loop(self) -> str | None: ...


def add_ops_routes(app: web.Application, host: OpsHost) -> None:
    async def metrics(_request: web.Request) -> web.Response:
        body = await asyncio.to_thread(generate_latest, host.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_request: web.Request) -> web.Response:
        problem = host.stuck_loop()
        return web.json_response({"ok": problem is None, "problem": problem},
                                 status=503 if problem else 200)

    async def readyz(_request: web.Request) -> web.Response:
        failing = {k: v for k, v in host.readiness().items() if v}
        return web.json_response({"ready": not failing, "not_ready": failing},
                                 status=503 if failing else 200)

    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)


TargetsView = Callable[[], tuple[Sequence[Target], Mapping[str, ScrapeResult],
                                 Sequence[str], Mapping[str, str]]]


def add_targets_route(app: web.Application, view: TargetsView) -> None:
    """``/targets`` from ``view()``: (targets, last result by URL, conflicts, discovery
    errors by source)."""

    async def targets(_request: web.Request) -> web.Response:
        listed, results, conflicts, errors = view()
        return web.json_response({
            "targets": [target_row(t, results.get(t.url)) for t in listed],
            "discovery_conflicts": list(conflicts),
            "discovery_errors": dict(errors),
        })

    app.router.add_get("/targets", targets)


def target_row(target: Target, result: ScrapeResult | None) -> dict[str, Any]:
    row: dict[str, Any] = {"url": target.url, "node": target.node_id, "tenant": target.tenant}
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
