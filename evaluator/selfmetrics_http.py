"""HTTP endpoints about the evaluator itself: /metrics, /healthz, /readyz, /targets.

- ``/metrics``: the app's CollectorRegistry in the Prometheus text format;
- ``/healthz``: liveness; 503 only when the ingest loop has not finished a tick (successful or
  not) for ``max(3 x interval + timeout, 5 min)``, i.e. it is stuck, not merely failing;
- ``/readyz``: 200 when the store is open and migrated and discovery has produced a target list
  from every source (plus checks other parts add), else 503 with the reasons;
- ``/targets``: every target with its last scrape result and error text (for operators).

The error middleware is the single catch-all of every request: it logs, counts
``gpu_health_evaluator_request_errors_total{reason}`` and answers JSON; ``ApiError`` keeps its
status and parameter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Counter, generate_latest

from evaluator.selfmetrics import PREFIX, SelfMetrics
from gpu_health.errors import ApiError, GpuHealthError

if TYPE_CHECKING:
    from evaluator.app import EvaluatorApp

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_middleware(metrics: SelfMetrics) -> Any:
    errors = Counter(PREFIX + "request_errors", "HTTP requests that failed inside a handler, "
                     "by reason.", ["reason"], registry=metrics.registry)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException:
            raise  # deliberate HTTP answers (404, 405, ...) are not errors of ours
        except Exception as exc:  # the one catch-all of every request
            if isinstance(exc, ApiError):
                errors.labels(exc.reason).inc()
                body: dict[str, Any] = {"error": str(exc)}
                if exc.param is not None:
                    body["param"] = exc.param
                return web.json_response(body, status=exc.status)
            reason = exc.reason if isinstance(exc, GpuHealthError) else "internal"
            log.error("%s %s failed (%s)", request.method, request.path, reason, exc_info=exc)
            errors.labels(reason).inc()
            return web.json_response({"error": "internal error", "reason": reason}, status=500)

    return middleware


def add_core_routes(app: web.Application, ev: EvaluatorApp) -> None:
    async def metrics(_request: web.Request) -> web.Response:
        body = await asyncio.to_thread(generate_latest, ev.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_request: web.Request) -> web.Response:
        problem = _stuck_loop(ev)
        status = 503 if problem else 200
        return web.json_response({"ok": problem is None, "problem": problem}, status=status)

    async def readyz(_request: web.Request) -> web.Response:
        checks = ev.readiness()
        failing = {k: v for k, v in checks.items() if v}
        return web.json_response({"ready": not failing, "not_ready": failing},
                                 status=503 if failing else 200)

    async def targets(_request: web.Request) -> web.Response:
        return web.json_response({
            "targets": [_target_row(ev, t) for t in ev.discovery.targets],
            "discovery_conflicts": list(ev.discovery.conflicts),
            "discovery_errors": ev.discovery.last_errors,
        })

    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/targets", targets)


def _stuck_loop(ev: EvaluatorApp) -> str | None:
    if not ev.start_loops or ev.loops_started_at is None:
        return None
    cfg = ev.config.scrape
    limit = max(3 * cfg.interval + cfg.timeout, 300.0)
    last = ev.loop_ticks.get("ingest", ev.loops_started_at)
    age = asyncio.get_running_loop().time() - last
    if age > limit:
        return f"the ingest loop has not finished a cycle for {age:.0f}s (limit {limit:.0f}s)"
    return None


def _target_row(ev: EvaluatorApp, target: Any) -> dict[str, Any]:
    result = ev.pipeline.last_results.get(target.url) if ev.pipeline else None
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
