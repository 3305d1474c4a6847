"""The API's one catch-all: every request under /api/v1 passes through ``error_middleware``.

It turns refusals (``ApiError``: 400/401/403/404) and router misses (404/405) into the JSON
error body ``{"error": ..., "param": ...}``, turns anything unexpected into a generic 500 (the
details go to the log, never to the client), and counts every request by endpoint and status
code and every error by reason in the evaluator's registry.
"""

from __future__ import annotations

import logging
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CollectorRegistry, Counter

from evaluator.api.context import dumps
from gpu_health.errors import ApiError, GpuHealthError

log = logging.getLogger(__name__)

WWW_AUTHENTICATE: Final = 'Bearer realm="gpu-health"'
INTERNAL_ERROR: Final = "internal error; the evaluator log has the details"


class ApiMetrics:
    """Request self-metrics, registered once per application in the given registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "gpu_health_evaluator_api_requests", "API requests by endpoint and HTTP status code.",
            ["endpoint", "code"], registry=registry,
        )
        self.errors = Counter(
            "gpu_health_evaluator_api_errors",
            "API requests that ended in an error, by reason (http_<status> for refusals, the "
            "error's reason for failures such as store errors, 'unexpected' for bugs).",
            ["reason"], registry=registry,
        )


def error_body(status: int, message: str, param: str | None = None) -> web.Response:
    response = web.json_response({"error": message, "param": param}, status=status, dumps=dumps)
    if status == 401:
        response.headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    return response


def _endpoint(request: web.Request) -> str:
    # The route template, never the raw path: raw paths would make the label unbounded.
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def error_middleware(metrics: ApiMetrics) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        reason: str | None = None
        try:
            response = await handler(request)
        except ApiError as exc:
            reason, response = exc.reason, error_body(exc.status, str(exc), exc.param)
            log.debug("%s %s -> %d: %s", request.method, request.path_qs, exc.status, exc)
        except web.HTTPException as exc:  # the router's own 404 / 405
            reason = f"http_{exc.status}"
            response = error_body(exc.status, f"{exc.reason}: {request.method} {request.path}")
        except Exception as exc:  # the catch-all: log with traceback, answer generically
            reason = exc.reason if isinstance(exc, GpuHealthError) else "unexpected"
            log.exception("API %s %s failed (%s)", request.method, request.path_qs, reason)
            response = error_body(500, INTERNAL_ERROR)
        metrics.requests.labels(_endpoint(request), str(response.status)).inc()
        if reason is not None:
            metrics.errors.labels(reason).inc()
        return response

    return middleware
