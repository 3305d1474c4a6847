"""The evaluator's one error path: every HTTP request and every error answer goes through here.

- :func:`error_middleware` is installed once, on the root application, so it covers every route
  (operator endpoints and the /api/v1 sub-application alike, aiohttp runs a parent's middlewares
  for its sub-applications' handlers). It is the single catch-all of every request: it turns
  refusals (``ApiError``: 400/401/403/404/503), router misses (404/405) and anything unexpected
  (a generic 500; the details go to the log, never to the client) into the JSON body
  ``{"error": ..., "param": ...}``, and counts every request by route template and status, and
  every error by reason.
- :class:`JsonErrorRunner` covers what no middleware sees: aiohttp answers a request it cannot
  parse (a header line over 8190 bytes, a broken request line) itself, in plain text with the
  parser's message, which quotes the client's bytes back. The runner answers those in the same
  JSON shape, without echoing anything.

One reason vocabulary (the ``reason`` label, ``gpu_health.errors``): ``http_<status>`` for a
refusal, the error's own reason for a failure of ours (``query``, ``store``, ...), and
``internal`` for a bug.
"""

from __future__ import annotations

import logging
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from prometheus_client import CollectorRegistry, Counter

from gpu_health.errors import ApiError, GpuHealthError

log = logging.getLogger(__name__)

WWW_AUTHENTICATE: Final = 'Bearer realm="gpu-health"'
INTERNAL_ERROR: Final = "internal error; the evaluator log has the details"
INTERNAL: Final = "internal"
UNPARSEABLE: Final = "the request could not be parsed (request line or headers)"


class RequestMetrics:
    """Request self-metrics, registered once per application in the given registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "gpu_health_evaluator_http_requests",
            "HTTP requests by route template and status code.",
            ["endpoint", "code"], registry=registry,
        )
        self.errors = Counter(
            "gpu_health_evaluator_http_errors",
            "HTTP requests that ended in an error, by reason (http_<status> for refusals, the "
            "error's reason for failures such as store errors, 'internal' for bugs).",
            ["reason"], registry=registry,
        )


def error_body(status: int, message: str, param: str | None = None,
               challenge: str | None = None, retry_after: int | None = None) -> web.Response:
    """The one JSON error shape; a 401 also says how to authenticate, a shed request when to
    come back."""
    response = web.json_response({"error": message, "param": param}, status=status)
    if status == 401:
        response.headers["WWW-Authenticate"] = challenge or WWW_AUTHENTICATE
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


def _endpoint(request: web.Request) -> str:
    # The route template, never the raw path: raw paths would make the label unbounded.
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def error_middleware(metrics: RequestMetrics) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        reason: str | None = None
        try:
            response = await handler(request)
        except ApiError as exc:
            reason = exc.reason
            response = error_body(exc.status, str(exc), exc.param, exc.challenge,
                                  exc.retry_after)
            log.debug("%s %s -> %d: %s", request.method, request.path, exc.status, exc)
        except web.HTTPException as exc:  # the router's own 404 / 405
            reason = f"http_{exc.status}"
            response = error_body(exc.status, f"{exc.reason}: {request.method} {request.path}")
        except Exception as exc:  # the catch-all: log with traceback, answer generically
            reason = exc.reason if isinstance(exc, GpuHealthError) else INTERNAL
            log.exception("%s %s failed (%s)", request.method, request.path, reason)
            response = error_body(500, INTERNAL_ERROR)
        metrics.requests.labels(_endpoint(request), str(response.status)).inc()
        if reason is not None:
            metrics.errors.labels(reason).inc()
        return response

    return middleware


class _JsonErrorHandler(RequestHandler):
    """aiohttp's connection handler, answering unparseable requests in our JSON shape."""

    def handle_error(self, request: BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        # aiohttp 3.9-3.14 put the parser's message (which quotes the request) in a text/plain
        # body here; the log keeps it, the client gets the status phrase only.
        log.debug("unparseable request from %s (%d): %s", request.remote, status,
                  message or exc)
        response = error_body(status, UNPARSEABLE if status < 500 else INTERNAL_ERROR)
        response.force_close()
        return response


class _JsonErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class JsonErrorRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer unparseable requests in JSON (see above)."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The server keeps no state of its own beyond web.Server's: re-classing it only swaps
        # the connection-handler factory.
        server.__class__ = _JsonErrorServer
        return server
