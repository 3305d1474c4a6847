"""Who may see what: every route has one explicit access rule, enforced by one middleware.

A route is registered together with its rule (:func:`allow`); :func:`access_middleware` looks
the matched route up and

- ``PUBLIC`` (health, readiness, the process's own metrics): anyone;
- ``NODES_READ`` / ``ALERTS_WRITE``: authenticates the caller (bearer token, or the open
  loopback mode without a tokens file, exactly as the read API always has: see
  ``http/api/auth.py``), checks the scope, and leaves the :class:`Principal` on the request
  (``request[PRINCIPAL]``) for the handler, which filters by the caller's tenants.

A route without a rule is refused (fail closed, 500 and an error in the log), and
:func:`unruled_routes` lets the host refuse to start with one; the router is enumerated, not a
hand-kept list. Which series of ``/metrics`` carry node data, and who sees them, is
:mod:`gpu_health.evaluator.http.ops`; docs/security.md has the whole table.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from enum import StrEnum
from typing import Final, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from gpu_health.errors import ApiError, GpuHealthError
from gpu_health.evaluator.http.api.auth import (
    BASIC_AUTH_PRINCIPAL,
    Principal,
    TokenSet,
    authenticate,
    is_loopback,
    require_scope,
)
from gpu_health.evaluator.http.errors import RequestMetrics, error_middleware
from gpu_health.evaluator.http.throttle import FailureThrottle
from gpu_health.logins import LoginVerdict
from gpu_health.webguard import REALM, WebGuard

log = logging.getLogger(__name__)
T = TypeVar("T")


class Rule(StrEnum):
    PUBLIC = "public"
    NODES_READ = "nodes:read"
    ALERTS_WRITE = "alerts:write"


RULES: Final = web.AppKey("access_rules", dict[str, Rule])  # route template -> rule
PRINCIPAL: Final = web.RequestKey("principal", Principal)


def new_application(registry_metrics: RequestMetrics, *, tokens: TokenSet | None,
                    listen_host: str, guard: WebGuard | None = None,
                    throttle: FailureThrottle | None = None) -> web.Application:
    """The root application: the one error path outside, access control inside it."""
    app = web.Application(middlewares=[error_middleware(registry_metrics),
                                       access_middleware(tokens, listen_host, guard, throttle)])
    app[RULES] = {}
    return app


def allow(app: web.Application, path: str, rule: Rule) -> None:
    """Record ``rule`` for the route template ``path`` (full path, sub-application prefix
    included) on the root application ``app``."""
    app[RULES][path] = rule


def open_mode(tokens: TokenSet | None, listen_host: str) -> bool:
    """No tokens file and a loopback listener: the one case where everything is open."""
    return tokens is None and is_loopback(listen_host)


def access_middleware(tokens: TokenSet | None, listen_host: str,
                      guard: WebGuard | None = None,
                      throttle: FailureThrottle | None = None) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        basic = guard is not None and guard.basic_auth
        if basic:  # --web.config.file's users: every route, as the exporter-toolkit does
            await _throttled(throttle, request, lambda: _basic_auth(
                guard, request.headers.get("Authorization"), request.remote or "unknown"))
        resource = request.match_info.route.resource
        if resource is None:  # the router's own 404/405: nothing to protect
            return await handler(request)
        rule = request.config_dict[RULES].get(resource.canonical)
        if rule is None:
            raise GpuHealthError(f"route {resource.canonical} has no access rule",
                                 reason="no_access_rule")
        if rule is not Rule.PUBLIC:
            principal = BASIC_AUTH_PRINCIPAL if basic else await _throttled(
                throttle, request, lambda: _bearer(request, tokens, listen_host))
            require_scope(principal, rule.value)
            request[PRINCIPAL] = principal
        return await handler(request)

    return middleware


async def _bearer(request: web.Request, tokens: TokenSet | None,
                  listen_host: str) -> Principal:
    return authenticate(request.headers.get("Authorization"), tokens, listen_host)


async def _throttled(throttle: FailureThrottle | None, request: web.Request,
                     auth: Callable[[], Awaitable[T]]) -> T:
    """Run an authentication, unless its client is throttled (the throttle counts its 401s)."""
    if throttle is None:
        return await auth()
    return await throttle.attempt(request.remote or "unknown", auth)


async def _basic_auth(guard: WebGuard | None, header: str | None, client: str) -> None:
    """ApiError(401) unless the request carries one of the web config's users, 429 while its
    client is throttled (bcrypt is slow: checked off the event loop)."""
    assert guard is not None
    verdict, wait = await asyncio.to_thread(guard.authorize, header, client)
    if verdict is LoginVerdict.THROTTLED:
        raise ApiError(429, "too many password checks: retry later",
                       retry_after=max(1, math.ceil(wait)))
    if verdict is not LoginVerdict.OK:
        raise ApiError(401, "basic authentication required (--web.config.file)",
                       challenge=REALM)


def routes(app: web.Application) -> Iterator[tuple[str, str]]:
    """(method, route template) of every route of ``app``; the router's view already holds
    the routes of mounted sub-applications, with their prefix."""
    for route in app.router.routes():
        resource = route.resource
        if resource is not None and route.method != "HEAD":  # aiohttp adds HEAD beside GET
            yield route.method, resource.canonical


def unruled_routes(app: web.Application) -> list[str]:
    """Route templates of ``app`` that have no access rule (should be none)."""
    rules = app[RULES]
    return sorted({path for _, path in routes(app) if path not in rules})
