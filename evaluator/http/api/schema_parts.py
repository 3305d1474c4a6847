"""Building blocks of the OpenAPI document (:mod:`gpu_health.evaluator.http.api.openapi`): the JSON
Schema helpers, the scalar types, and the per-card records of the capability matrix."""

from __future__ import annotations

from typing import Any, Final

from gpu_health.contract import COUNTER_KEYS, SOURCES

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(props: dict[str, Schema], *, optional: tuple[str, ...] = ()) -> Schema:
    required = [k for k in props if k not in optional]
    return {"type": "object", "required": required, "properties": props,
            "additionalProperties": False}


def nullable(type_: str, **extra: Any) -> Schema:
    return {"type": [type_, "null"], **extra}


TS: Final[Schema] = {"type": "string", "format": "date-time"}
TS_NULL: Final[Schema] = {"type": ["string", "null"], "format": "date-time"}
INT: Final[Schema] = {"type": "integer"}
INT_NULL: Final[Schema] = nullable("integer")
STR: Final[Schema] = {"type": "string"}
STR_NULL: Final[Schema] = nullable("string")
SOURCE: Final[Schema] = {"type": "string", "enum": list(SOURCES)}
COUNTERS_NULL: Final[dict[str, Schema]] = {
    k: nullable("integer", description="null: unknown (not collected), never 0")
    for k in COUNTER_KEYS
}


CARD: Final = obj({
    "node_id": STR, "gpu_index": INT, "gpu_uuid": STR_NULL,
    "metrics": obj({k: {"type": "string", "enum": ["collectable", "unknown"]}
                     for k in COUNTER_KEYS}),
    "first_sample_at": TS, "last_sample_at": TS, "sample_count": INT,
    "collection_stalled": {"type": "boolean",
                           "description": "No sample (keepalive rows included) for more than "
                                          "stall_minutes."},
    "growth_prediction_possible": {"type": "boolean",
                                   "description": "The corrected ECC counter is collectable."},
    "xid_collectable": {"type": "boolean",
                        "description": "Kernel-log XID counts (gpu_health_xid_errors_total) "
                                       "were stored for this card: memory XIDs can count as "
                                       "fault events (rule sets with fault_xids). false: none "
                                       "stored yet (unknown, not 'no XID')."},
    "action": {**obj({"action": {"type": "string", "enum": [
        "replace_candidate", "reboot_node", "reset_gpu", "restart_workload", "none",
        "unknown"]},
        "reason": STR, "policy": STR_NULL}),
        "description": "Recommended by the policy version named (docs/actions.md), not a "
                       "diagnosis; unknown when the policy cannot judge the card."},
})
NODE_CARDS: Final = obj({
    "node_id": STR,
    "cards_with_samples": {**INT, "description": "Rows of this node in items."},
    "listed_cards": {**INT_NULL, "description": "Cards the node's last scrape of this source "
                     "listed, all-unknown ones included; null: no scrape listed the node."},
    "unsampled_cards": {**INT_NULL, "description": "listed_cards - cards_with_samples when "
                        "positive, else 0: cards whose counters are all unknown (a count, not "
                        "which ones); null when listed_cards is."},
    "listed_at": TS_NULL,
})
