"""The Alertmanager API v2 body for GPU_FAULT_PREDICTED (pure: alert rows in, dicts out).

Shape as Prometheus's notifier sends it and as Alertmanager 0.25.0 accepted it (see
``../shared/fixtures/alerting``): a JSON list of ``{labels, annotations, startsAt, endsAt,
generatorURL}``. A firing alert carries ``endsAt = now + 4 x resend interval`` (Prometheus uses
4 x max(evaluation interval, resend delay)), so Alertmanager keeps it active across one missed
push but lets it expire if the evaluator dies; a closed alert carries ``endsAt`` = close time,
which Alertmanager turns into "resolved". Alertmanager rejects ``endsAt <= startsAt`` (HTTP 400
"start time must be before end time"), so the end is kept at least one second after the start.

The label set is the alert's identity in Alertmanager (its fingerprint) and never changes while
the alert lives: alertname, node, severity and the tenant recorded when the alert opened. Card
details go to annotations, which Alertmanager replaces on every push. The wording says
"predicted", never "failed", and names hardware error counters, so nobody mistakes it for a
memory-usage alert (the card's memory may well be idle).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final
from urllib.parse import quote

from gpu_health.clock import rfc3339
from gpu_health.evaluator.store.operations.alerts import AlertView

ALERTNAME: Final = "GPU_FAULT_PREDICTED"
SEVERITY: Final = "warning"
ENDS_AFTER_RESENDS: Final = 4
PREDICTIONS_PATH: Final = "/api/v1/gpu-health/predictions"
RESOLVE_PATH: Final = "/api/v1/gpu-health/alerts/{node}/resolve"
UNKNOWN: Final = "unknown"
CALIBRATION: Final = ("Thresholds are initial empirical values awaiting calibration on real "
                      "data.")

_STATUS_NOTE: Final = {
    "pending": "",
    "hit": "Update: an uncorrectable-error increase of this card was observed inside the "
           "window (hit: {outcome}). The card needs maintenance; this alert stays open until "
           "an operator resolves it. ",
    "miss": "Update: the window ended without an observed fault (miss: {outcome}); this alert "
            "stays open until an operator resolves it. ",
    "voided": "Update: the window could not be decided (voided: {outcome}); this is not a "
              "recovery, the card was not observed healthy. ",
}


def generator_url(external_url: str, node_id: str) -> str:
    """The evaluator's predictions API for the node (what the alert links back to)."""
    return f"{external_url.rstrip('/')}{PREDICTIONS_PATH}?node_id={quote(node_id, safe='')}"


def alert_labels(alert: AlertView) -> dict[str, str]:
    result = {"alertname": ALERTNAME, "node": alert.node_id, "severity": SEVERITY}
    if alert.tenant:
        result["tenant"] = alert.tenant
    return result


def _text(value: object) -> str:
    return UNKNOWN if value is None or value == "" else str(value)


def _window(alert: AlertView) -> str:
    if alert.window_days is None or alert.t0 is None or alert.window_end is None:
        return UNKNOWN
    start, end = rfc3339(alert.t0, "milliseconds"), rfc3339(alert.window_end, "milliseconds")
    return f"{alert.window_days}d: {start} to {end}"


def summary(alert: AlertView) -> str:
    return (f"GPU fault predicted on node {alert.node_id} (GPU {_text(alert.gpu_index)}): "
            "its hardware error counters are degrading")


def description(alert: AlertView) -> str:
    status = alert.prediction_status or "pending"
    note = _STATUS_NOTE.get(status, "").format(outcome=_text(alert.outcome))
    others = ""
    if len(alert.node_gpus) > 1:
        others = ("Cards of this node with a live prediction: GPU "
                  + ", ".join(map(str, alert.node_gpus)) + ". ")
    verb, kind = ("predicts", "This is a prediction, not an observed fault, and it is not "
                  "about memory usage.") if status == "pending" else (
        "predicted", "It is about hardware error counters, not memory usage.")
    return (
        f"{note}Rule {_text(alert.rule_version)} {verb} that GPU {_text(alert.gpu_index)} "
        f"(UUID {_text(alert.gpu_uuid)}) of node {alert.node_id} may develop uncorrectable "
        f"memory errors within its window ({_window(alert)}), from the trend of its hardware "
        f"error counters (ECC, row remapping, retired pages). {kind} Suggested action: plan a "
        f"maintenance window and prepare a replacement card. {others}{CALIBRATION} Once "
        f"handled, resolve it with POST "
        f"{RESOLVE_PATH.format(node=quote(alert.node_id, safe=''))} (audited)."
    )


def alert_annotations(alert: AlertView) -> dict[str, str]:
    return {
        "summary": summary(alert),
        "description": description(alert),
        "window": _window(alert),
        "evidence": _text(alert.evidence),
        "rule_version": _text(alert.rule_version),
        "prediction_id": alert.prediction_id,
        "prediction_status": _text(alert.prediction_status),
        "signal": _text(alert.signal),
        "gpu": _text(alert.gpu_index),
        "uuid": _text(alert.gpu_uuid),
        "recommended_action": alert.action or "unknown (no recommendation for this card)",
    }


def _alert(alert: AlertView, ends_at: datetime, external_url: str) -> dict[str, Any]:
    ends_at = max(ends_at, alert.opened_at + timedelta(seconds=1))
    return {
        "labels": alert_labels(alert),
        "annotations": alert_annotations(alert),
        "startsAt": rfc3339(alert.opened_at, "milliseconds"),
        "endsAt": rfc3339(ends_at, "milliseconds"),
        "generatorURL": generator_url(external_url, alert.node_id),
    }


def firing(alert: AlertView, *, now: datetime, resend_interval: timedelta,
           external_url: str) -> dict[str, Any]:
    """An open alert: active until ``now + 4 x resend_interval`` unless pushed again."""
    return _alert(alert, now + ENDS_AFTER_RESENDS * resend_interval, external_url)


def resolved(alert: AlertView, *, external_url: str) -> dict[str, Any]:
    """A closed alert: ``endsAt`` = its close time, which resolves it in Alertmanager."""
    if alert.closed_at is None:
        raise ValueError(f"alert {alert.id} is not closed")
    return _alert(alert, alert.closed_at, external_url)
