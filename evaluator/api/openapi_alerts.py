"""OpenAPI additions for the alert action (merged into the document by ``openapi.document``).

Kept apart from the read API's document so the two can change independently; plain dicts only
(no import from ``openapi``, which imports this module).
"""

from __future__ import annotations

from typing import Any, Final

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
