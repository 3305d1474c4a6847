"""The OpenAPI 3.1 document of the read API, served at /api/v1/openapi.json.

Written by hand (descriptions matter more than generation here) and kept honest by the tests:
the document is validated with openapi-spec-validator, every response the real server gives is
validated against these schemas, and every declared parameter must be accepted while any other
is refused. Schemas are JSON Schema 2020-12 (OpenAPI 3.1), so nullable is ``[T, "null"]``.
"""

from __future__ import annotations

import copy
from typing import Final

from gpu_health import __version__
from gpu_health.evaluator.http.api.alerts import ALERT_PATHS, ALERT_SCHEMAS
from gpu_health.evaluator.http.api.query_params import PARAMETERS
from gpu_health.evaluator.http.api.schema_parts import (
    CARD,
    COUNTERS_NULL,
    INT,
    INT_NULL,
    NODE_CARDS,
    SOURCE,
    STR,
    STR_NULL,
    TS,
    TS_NULL,
    Schema,
    nullable,
    obj,
    ref,
)
from gpu_health.evaluator.model import STATUSES

PREFIX: Final = "/api/v1/gpu-health"


_PREDICTION: Final = obj({
    "id": STR, "node_id": STR, "gpu_index": INT, "gpu_uuid": STR_NULL, "source": SOURCE,
    "rule_version": {**STR, "description": "Frozen when the prediction was stored."},
    "window_days": {**INT, "description": "Frozen hit window: (t0, t0 + window_days]."},
    "t0": {**TS, "description": "Sample time the prediction is based on (not the clock)."},
    "window_end": TS, "predicted_at": TS, "signal": STR, "layer": STR,
    "evidence": {**STR, "description": "The rule's evidence, as stored."},
    "uncorrected_at_t0": INT_NULL,
    "status": {"type": "string", "enum": list(STATUSES)},
    "resolved_at": TS_NULL, "outcome": STR_NULL,
    "shadow": {"type": "boolean", "description": "Made by a shadow version (rules.shadow): "
                                                 "never alerted, not in the default statistics."},
})
_NUMBER_NULL: Final = nullable(
    "number", description="null when the sample is insufficient (never 0 for 'no data')")
_CI95: Final = {
    "type": ["array", "null"], "items": {"type": "number", "minimum": 0, "maximum": 1},
    "minItems": 2, "maxItems": 2,
    "description": "[low, high]: the 95% Wilson score interval of the ratio beside it, from "
                   "the counts shown; null whenever the ratio is null."}
_CLASS_STATS: Final = obj({
    "predictions": obj(dict.fromkeys(STATUSES, INT)),
    "matured": INT, "precision": _NUMBER_NULL, "recall": _NUMBER_NULL, "f1": _NUMBER_NULL,
    "precision_ci95": _CI95, "recall_ci95": _CI95,
    "faulty_cards": INT, "predicted_faulty_cards": INT, "missed_cards": INT,
    "missed": {"type": "array", "items": ref("MissedCard")},
    "sufficient": {"type": "boolean"}, "note": STR,
})
_STATS_WINDOW: Final = obj({
    "window_days": {"type": "integer", "enum": [7, 30],
                    "description": "Predictions whose frozen window is this many days."},
    "rule_versions": {"type": "array", "items": STR,
                      "description": "Rule versions of the predictions counted."},
    "fault_events": {"type": "array", "items": {"type": "string",
                                                 "pattern": "^(ecc_uncorrected|xid:[0-9]+)$"},
                     "description": "The fault-event definition recall was computed with "
                                    "(the active rule set's): ecc_uncorrected, plus xid:<code> "
                                    "per memory XID it counts. Precision uses each "
                                    "prediction's frozen outcome."},
    "predictions": obj(dict.fromkeys(STATUSES, INT)),
    "matured": {**INT, "description": "hit + miss (pending and voided excluded)."},
    "precision": _NUMBER_NULL, "recall": _NUMBER_NULL, "f1": _NUMBER_NULL,
    "precision_ci95": _CI95, "recall_ci95": _CI95,
    "monitorable_cards": INT, "faulty_cards": INT, "predicted_faulty_cards": INT,
    "missed_cards": INT,
    "missed": {"type": "array", "items": ref("MissedCard")},
    "exposure_card_days": {"type": "number"},
    "observed_days": nullable("number", description="null: unknown (no samples)"),
    "required_days": INT, "required_matured": INT, "sufficient": {"type": "boolean"},
    "note": {**STR, "description": "observed X days (gate Y), N matured (gate M), and why "
                                   "ratios are null when they are."},
    "by_class": {**obj({"first_fault": _CLASS_STATS, "repeat": _CLASS_STATS}),
                 "description": "first_fault: made on a card with no fault observed at or "
                                "before t0; repeat: on a card that had already failed. The "
                                "same gates apply per class; first-fault recall counts cards "
                                "whose first fault fell inside such a prediction's window."},
})
_INCREASE: Final = obj({
    "increase": nullable("integer", minimum=0),
    "reason": {"type": ["string", "null"],
               "enum": ["stale_or_missing", "uuid_changed", "unknown_value",
                        "counter_decreased", None]},
})
_COVERAGE: Final = obj({"computable_hours": INT, "total_hours": INT,
                         "sum_increase": nullable("integer", minimum=0)})
_RATE_KEYS: Final = ("ecc_corrected_total", "ecc_uncorrected_total")

SCHEMAS: Final[dict[str, Schema]] = {
    "Error": obj({"error": STR, "param": {
        **STR_NULL, "description": "The query parameter at fault, when one is."}}),
    "Prediction": _PREDICTION,
    "PredictionList": obj({
        "items": {"type": "array", "items": ref("Prediction")},
        "total": INT, "limit": INT, "offset": INT,
        "current_rule_version": {**STR, "description": "Compare with each item's frozen "
                                                       "rule_version."},
        "source": SOURCE, "since": TS_NULL, "until": TS_NULL,
    }),
    "MissedCard": obj({"node_id": STR, "gpu_index": INT, "gpu_uuid": STR_NULL,
                        "first_fault_at": TS}),
    "StatsWindow": _STATS_WINDOW,
    "PredictionStats": obj({
        "source": SOURCE, "since": TS, "until": TS, "generated_at": TS,
        "disclaimer": {**STR, "description": "Show verbatim."},
        "windows": {"type": "array", "items": ref("StatsWindow"), "minItems": 2,
                    "maxItems": 2},
    }),
    "CardCapability": CARD,
    "Capabilities": obj({
        "source": SOURCE, "generated_at": TS, "stall_minutes": INT,
        "items": {"type": "array", "items": ref("CardCapability")},
        "nodes": {"type": "array", "items": ref("NodeCards")}, "note": STR,
    }),
    "NodeCards": NODE_CARDS,
    "Sample": obj({
        "sampled_at": TS, "gpu_uuid": STR_NULL, **COUNTERS_NULL,
        "future": {"type": "boolean", "description": "sampled_at is later than the server's "
                                                     "now (skewed agent clock)."},
    }),
    "Samples": obj({
        "node_id": STR, "gpu_index": INT, "source": SOURCE, "since": TS, "until": TS,
        "limit": INT, "count": INT,
        "truncated": {"type": "boolean", "description": "More samples matched; only the newest "
                                                        "`limit` are returned (oldest first)."},
        "items": {"type": "array", "items": ref("Sample")},
    }),
    "EccIncrease": _INCREASE,
    "EccHour": obj({"start": TS, "end": TS, **{k: ref("EccIncrease") for k in _RATE_KEYS}}),
    "EccCoverage": _COVERAGE,
    "EccRate": obj({
        "node_id": STR, "gpu_index": INT, "source": SOURCE,
        "since": {**TS, "description": "since, rounded down to the hour."},
        "until": {**TS, "description": "until, rounded down to the hour (the running hour is "
                                       "not complete and is left out)."},
        "stall_minutes": INT,
        "hours": {"type": "array", "items": ref("EccHour")},
        "coverage": obj({k: ref("EccCoverage") for k in _RATE_KEYS}),
        "note": STR,
    }),
}


def _error(description: str) -> Schema:
    return {"description": description,
            "content": {"application/json": {"schema": ref("Error")}}}


RESPONSES: Final[dict[str, Schema]] = {
    "BadRequest": _error("A bad, unknown or repeated query parameter (`param` names it)."),
    "Unauthorized": {**_error("Missing or unknown bearer token, or no tokens file configured "
                              "on a non-loopback address."),
                     "headers": {"WWW-Authenticate": {"schema": STR}}},
    "Forbidden": _error("The token lacks the scope `nodes:read`."),
    "NotFound": _error("The node does not exist or is outside your tenants (same answer)."),
    "InternalError": _error("Unexpected failure; details are in the evaluator log."),
    "Unavailable": _error("The store is not open yet (start-up) or any more (shutdown)."),
}


def _operation(summary: str, description: str, params: list[str], schema: str, *,
               node: bool) -> Schema:
    responses: dict[str, Schema] = {
        "200": {"description": "OK", "content": {"application/json": {"schema": ref(schema)}}},
        "400": {"$ref": "#/components/responses/BadRequest"},
        "401": {"$ref": "#/components/responses/Unauthorized"},
        "403": {"$ref": "#/components/responses/Forbidden"},
        "500": {"$ref": "#/components/responses/InternalError"},
        "503": {"$ref": "#/components/responses/Unavailable"},
    }
    if node:
        responses["404"] = {"$ref": "#/components/responses/NotFound"}
    return {"get": {
        "summary": summary, "description": description, "operationId": schema[0].lower()
        + schema[1:], "parameters": [{"$ref": f"#/components/parameters/{p}"} for p in params],
        "responses": dict(sorted(responses.items())),
    }}


PATHS: Final[dict[str, Schema]] = {
    f"{PREFIX}/predictions": _operation(
        "Stored predictions, newest t0 first",
        "Filters apply to t0. Every item keeps the rule_version and window_days frozen when it "
        "was stored; current_rule_version is the version the worker runs now.",
        ["node_id", "gpu_index", "status", "since", "until", "source", "rule_version",
         "limit_pred", "offset"],
        "PredictionList", node=True),
    f"{PREFIX}/prediction-stats": _operation(
        "Precision and recall over 7 and 30 days, side by side",
        "precision = hit / matured (pending and voided excluded); recall = predicted faulty "
        "cards / all monitorable cards with a real fault (missed cards listed; fault_events "
        "says which events count as faults). Ratios are null, "
        "never 0, while fewer than required_matured predictions matured or fewer than "
        "required_days were observed. since defaults to the retention period. Without "
        "rule_version the active versions' predictions count (never a shadow version's); "
        "with it, that version's alone (its own gates and fault definition when it is the "
        "active or a configured shadow version).",
        ["source", "since", "rule_version"], "PredictionStats", node=False),
    f"{PREFIX}/capabilities": _operation(
        "Capability matrix derived from samples",
        "Per card: which of the five counters ever had a non-null value (collectable) or not "
        "(unknown), first/last sample, sample count, collection_stalled, whether growth "
        "prediction is possible, and whether XID counts were collected. Samples dated after "
        "now are ignored.",
        ["node_id", "source"], "Capabilities", node=True),
    f"{PREFIX}/samples": _operation(
        "Raw samples of one card",
        "Samples in [since, until] (since defaults to until - 7 days, until to now), oldest "
        "first. When more than `limit` match, the newest `limit` are returned and truncated is "
        "true. Samples dated after the server's now are only included when until reaches them, "
        "and carry future=true.",
        ["node_id_req", "gpu_index_req", "source", "since", "until", "limit_samples"],
        "Samples", node=True),
    f"{PREFIX}/ecc-rate": _operation(
        "Hourly corrected / uncorrected ECC increases of one card",
        "For each whole hour [h, h+1) between since and until (rounded down to hours; since "
        "defaults to until - 7 days): increase = value at h+1 - value at h, where the value at a "
        "boundary is the newest sample at or before it, at most stall_minutes old. The hour is "
        "null with a reason when a boundary is stale or missing, the UUID differs between the "
        "boundaries, a boundary value is unknown, or the counter decreased.",
        ["node_id_req", "gpu_index_req", "source", "since", "until"], "EccRate", node=True),
    "/api/v1/openapi.json": {"get": {
        "summary": "This document", "operationId": "openapi", "security": [],
        "responses": {"200": {"description": "The OpenAPI document",
                              "content": {"application/json": {"schema": {"type": "object"}}}}},
    }},
}


def document() -> Schema:
    """The whole OpenAPI document (a deep copy each call, so no caller can alter another's)."""
    return copy.deepcopy({
        "openapi": "3.1.0",
        "info": {
            "title": "gpu-health evaluator read API",
            "version": __version__,
            "description": "Predictions, prediction statistics, capability matrix, samples and "
                           "hourly ECC rates. Unknown is null, never 0. Simulated data is only "
                           "returned with source=simulated and never mixed with real data.",
        },
        "security": [{"bearerAuth": []}],
        "paths": {**PATHS, **ALERT_PATHS},
        "components": {
            "securitySchemes": {"bearerAuth": {
                "type": "http", "scheme": "bearer",
                "description": "A token whose SHA-256 is in the tokens file, with scope "
                               "nodes:read. Without a tokens file the API is open on loopback "
                               "only."}},
            "parameters": PARAMETERS,
            "responses": RESPONSES,
            "schemas": {**SCHEMAS, **ALERT_SCHEMAS},
        },
    })
