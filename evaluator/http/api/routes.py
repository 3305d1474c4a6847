"""Mounts the read API on the evaluator's aiohttp application.

Everything lives in a sub-application at /api/v1; errors, its 404/405s included, take the one
error path of the host application (:mod:`gpu_health.evaluator.http.errors`, installed on the root
application, which aiohttp runs for sub-applications too). Each endpoint authenticates first
(an unauthenticated caller learns nothing about parameters or nodes), then checks the scope,
then parses its query strictly.

Actions (``POST /api/v1/gpu-health/alerts/{node}/resolve``, scope ``alerts:write``) are
``Action`` entries of the same table: path variables and a JSON body instead of query parameters
(any query parameter is refused), with the same authenticate / require_scope / node_not_found.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from gpu_health.errors import ApiError
from gpu_health.evaluator.http.access import PRINCIPAL, Rule, allow
from gpu_health.evaluator.http.api import alerts, handlers_cards, handlers_predictions
from gpu_health.evaluator.http.api.auth import (
    SCOPE_ALERTS_WRITE,
    SCOPE_NODES_READ,
    Principal,
    is_loopback,
)
from gpu_health.evaluator.http.api.context import ApiContext, dumps
from gpu_health.evaluator.http.api.openapi import PREFIX, document
from gpu_health.evaluator.http.api.query_params import Query

log = logging.getLogger(__name__)

API_ROOT: Final = "/api/v1"
EndpointFn = Callable[[ApiContext, Principal, Query], Awaitable[dict[str, Any]]]
# (context, caller, path variables, parsed JSON body) -> response body
ActionFn = Callable[[ApiContext, Principal, dict[str, str], object], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    path: str  # full path, as in the OpenAPI document
    params: frozenset[str]
    scope: str
    fn: EndpointFn
    method: str = "GET"


@dataclass(frozen=True, slots=True)
class Action:
    """A state-changing endpoint: path variables and a JSON body, no query parameters."""

    path: str  # full path with {variables}, as in the OpenAPI document
    scope: str
    fn: ActionFn
    method: str = "POST"
    params: frozenset[str] = frozenset()


ENDPOINTS: Final[tuple[Endpoint | Action, ...]] = (
    Endpoint(f"{PREFIX}/predictions", handlers_predictions.PREDICTIONS_PARAMS,
             SCOPE_NODES_READ, handlers_predictions.predictions),
    Endpoint(f"{PREFIX}/prediction-stats", handlers_predictions.STATS_PARAMS,
             SCOPE_NODES_READ, handlers_predictions.prediction_stats),
    Endpoint(f"{PREFIX}/capabilities", handlers_cards.CAPABILITIES_PARAMS,
             SCOPE_NODES_READ, handlers_cards.capabilities),
    Endpoint(f"{PREFIX}/samples", handlers_cards.SAMPLES_PARAMS,
             SCOPE_NODES_READ, handlers_cards.samples),
    Endpoint(f"{PREFIX}/ecc-rate", handlers_cards.ECC_RATE_PARAMS,
             SCOPE_NODES_READ, handlers_cards.ecc_rate),
    Action(f"{PREFIX}/alerts/{{node}}/resolve", SCOPE_ALERTS_WRITE, alerts.resolve),
)


def _handler(ctx: ApiContext, endpoint: Endpoint) -> Callable[[web.Request], Awaitable[Any]]:
    async def handle(request: web.Request) -> web.Response:
        principal = request[PRINCIPAL]  # authenticated and scope-checked by the access rule
        query = Query.parse(request.query.items(), endpoint.params)
        async with _turn(ctx):
            body = await endpoint.fn(ctx, principal, query)
        return web.json_response(body, dumps=dumps)

    return handle


def _turn(ctx: ApiContext) -> AbstractAsyncContextManager[None]:
    """A turn at the store through the API's gate (none configured: no wait)."""
    return ctx.gate.turn() if ctx.gate is not None else nullcontext()


async def _json_body(request: web.Request) -> object:
    if not request.can_read_body:
        raise ApiError(400, 'a JSON body is required, e.g. {"reason": "card replaced"}',
                       param="reason")
    try:
        return await request.json()
    except ValueError as exc:
        raise ApiError(400, "the body is not valid JSON", param="reason") from exc


def _action(ctx: ApiContext, action: Action) -> Callable[[web.Request], Awaitable[Any]]:
    async def handle(request: web.Request) -> web.Response:
        principal = request[PRINCIPAL]  # authenticated and scope-checked by the access rule
        Query.parse(request.query.items(), action.params)
        body = await _json_body(request)
        async with _turn(ctx):
            result = await action.fn(ctx, principal, dict(request.match_info), body)
        return web.json_response(result, dumps=dumps)

    return handle


async def _openapi(request: web.Request) -> web.Response:
    return web.json_response(document(), dumps=dumps)


def _log_auth_mode(ctx: ApiContext) -> None:
    if ctx.basic_auth:
        log.info("API: the basic auth users of --web.config.file are required on every route")
    elif ctx.tokens is not None:
        log.info("API: bearer tokens required (%d token(s) loaded)", len(ctx.tokens.entries))
    elif is_loopback(ctx.listen_host):
        log.warning(
            "API is OPEN without authentication because it is bound to loopback (%s) and no "
            "api.tokens_file is configured; configure one before listening on other addresses",
            ctx.listen_host,
        )
    else:
        log.error(
            "API: no api.tokens_file configured and listening on %r (not loopback): every API "
            "request will be refused with 401 until a tokens file is configured",
            ctx.listen_host,
        )


def add_api_routes(app: web.Application, ctx: ApiContext) -> None:
    """Mount /api/v1 (the endpoints and /api/v1/openapi.json) on ``app``, made by
    :func:`gpu_health.evaluator.http.access.new_application` (the error path and the access rules),
    and record each route's rule: its scope, or public for the OpenAPI document. Call once per
    application, before it starts."""
    _log_auth_mode(ctx)
    api = web.Application()
    for endpoint in ENDPOINTS:
        route = endpoint.path.removeprefix(API_ROOT)
        if isinstance(endpoint, Action):
            api.router.add_route(endpoint.method, route, _action(ctx, endpoint))
        else:
            api.router.add_get(route, _handler(ctx, endpoint))
        allow(app, endpoint.path, Rule(endpoint.scope))
    api.router.add_get("/openapi.json", _openapi)
    allow(app, f"{API_ROOT}/openapi.json", Rule.PUBLIC)
    app.add_subapp(API_ROOT, api)
