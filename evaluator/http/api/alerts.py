"""``POST /api/v1/gpu-health/alerts/{node}/resolve``: an operator ends a GPU_FAULT_PREDICTED alert.

Scope ``alerts:write``; a node outside the caller's tenants is 404 exactly like a missing node.
The JSON body must carry a non-empty ``reason``; the close is written to the audit table with
the token's name as the actor, in the same transaction as the close itself. Resolving changes
nothing about the predictions (a hit stays a hit): it only says a person has handled the node.
The alert loop pushes the end to every Alertmanager on its next tick (within seconds).

The endpoint's OpenAPI paths and schemas (``ALERT_PATHS``, ``ALERT_SCHEMAS``) live here too and
are merged into the document by ``openapi.document``: plain dicts, no import from ``openapi``.
"""

from __future__ import annotations

from typing import Any, Final

from gpu_health.clock import rfc3339, rfc3339_or_none
from gpu_health.errors import ApiError
from gpu_health.evaluator.http.api.auth import Principal, node_not_found
from gpu_health.evaluator.http.api.context import ApiContext
from gpu_health.evaluator.http.api.query_params import UNNAMED, echo_name
from gpu_health.evaluator.store.operations.alerts import AlertView, resolve_alert
from gpu_health.evaluator.store.statistics import api_queries as q

MAX_REASON: Final = 1024
MAX_NODE: Final = 256
RESOLVE_NOTE: Final = (
    "the alert's end is pushed to every configured Alertmanager within seconds; the "
    "predictions keep their status (a hit stays a hit)"
)


def parse_reason(body: object) -> str:
    """The ``reason`` of a ``{"reason": "..."}`` body, or ApiError(400)."""
    if not isinstance(body, dict):
        raise ApiError(400, 'the body must be a JSON object {"reason": "..."}', param="reason")
    unknown = sorted({echo_name(str(k)) for k in body if k != "reason"})
    if unknown:
        raise ApiError(400, f"unknown body field(s): {', '.join(unknown)}; allowed: reason",
                       param=unknown[0] if unknown[0] != UNNAMED else None)
    reason = body.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ApiError(400, "reason is required: say what was done (e.g. 'card replaced, "
                       "ticket OPS-123')", param="reason")
    if len(reason) > MAX_REASON:
        raise ApiError(400, f"reason must be at most {MAX_REASON} characters", param="reason")
    return reason.strip()


def render(alert: AlertView) -> dict[str, Any]:
    return {
        "node_id": alert.node_id,
        "alert_id": alert.id,
        "prediction_id": alert.prediction_id,
        "opened_at": rfc3339(alert.opened_at),
        "closed_at": rfc3339_or_none(alert.closed_at),
        "closed_by": alert.closed_by,
        "reason": alert.close_reason,
        "note": RESOLVE_NOTE,
    }


async def resolve(ctx: ApiContext, principal: Principal, path: dict[str, str],
                  body: object) -> dict[str, Any]:
    node = path.get("node", "")
    if not 0 < len(node) <= MAX_NODE:
        raise ApiError(400, f"node must be 1 to {MAX_NODE} characters", param="node")
    reason = parse_reason(body)
    now, tenants = ctx.clock(), principal.tenant_list
    db = ctx.database()

    def work() -> AlertView:
        if not q.node_visible(db, node, tenants):
            raise node_not_found()
        alert = resolve_alert(db, node, actor=principal.name, reason=reason, now=now)
        if alert is None:
            raise ApiError(409, "the node has no open GPU_FAULT_PREDICTED alert",
                           param="node")
        return alert

    return render(await db.run(work))


# -- OpenAPI ----------------------------------------------------------------------------------

RESOLVE_PATH: Final = "/api/v1/gpu-health/alerts/{node}/resolve"


def _error(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


ALERT_SCHEMAS: Final[dict[str, Any]] = {
    "ResolveRequest": {
        "type": "object", "required": ["reason"], "additionalProperties": False,
        "properties": {"reason": {
            "type": "string", "minLength": 1, "maxLength": 1024,
            "description": "What was done, for the audit trail (e.g. 'card replaced, OPS-123').",
            "example": "GPU 3 replaced, ticket OPS-1234"}},
    },
    "ResolvedAlert": {
        "type": "object", "additionalProperties": False,
        "required": ["node_id", "alert_id", "prediction_id", "opened_at", "closed_at",
                     "closed_by", "reason", "note"],
        "properties": {
            "node_id": {"type": "string"},
            "alert_id": {"type": "string"},
            "prediction_id": {"type": "string",
                              "description": "The prediction that opened the alert."},
            "opened_at": {"type": "string", "format": "date-time"},
            "closed_at": {"type": "string", "format": "date-time"},
            "closed_by": {"type": "string", "description": "The token's name (audited)."},
            "reason": {"type": "string"},
            "note": {"type": "string"},
        },
    },
}

ALERT_PATHS: Final[dict[str, Any]] = {
    RESOLVE_PATH: {"post": {
        "summary": "Resolve the node's GPU_FAULT_PREDICTED alert (operator action, audited)",
        "description": (
            "Closes the node's open alert and records who (the token's name), when and why in "
            "the audit table. The alert's end is pushed to every Alertmanager within seconds. "
            "Predictions keep their status: a hit never resolves an alert by itself, and "
            "resolving does not make a card healthy. Requires the scope alerts:write. Query "
            "parameters are refused."),
        "operationId": "resolveAlert",
        "parameters": [{
            "name": "node", "in": "path", "required": True, "schema": {"type": "string"},
            "description": "Node id (404 when unknown or not visible to you).",
            "example": "gpu-node-01"}],
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/ResolveRequest"}}}},
        "responses": {
            "200": {"description": "Closed", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/ResolvedAlert"}}}},
            "400": _error("Missing or empty reason, a body that is not JSON, an unknown body "
                          "field or a query parameter (`param` names it)."),
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "403": _error("The token lacks the scope `alerts:write`."),
            "404": {"$ref": "#/components/responses/NotFound"},
            "409": _error("The node has no open GPU_FAULT_PREDICTED alert."),
            "500": {"$ref": "#/components/responses/InternalError"},
            "503": {"$ref": "#/components/responses/Unavailable"},
        },
    }},
}
