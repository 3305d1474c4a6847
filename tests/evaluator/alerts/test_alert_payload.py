"""The Alertmanager v2 body (pure): labels, wording, window/evidence annotations, endsAt rules,
and the shape Alertmanager 0.25.0 accepted in the captured exchange."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from gpu_health.evaluator.alerts import payload
from gpu_health.evaluator.store.operations.alerts import AlertView
from tests.shared import require_shared

OPENED = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
ALERT = AlertView(
    id="a1", node_id="gpu-node-01", tenant="team-a", opened_at=OPENED, last_sent_at=None,
    closed_at=None, closed_by=None, close_reason=None, prediction_id="p1", gpu_index=3,
    gpu_uuid="GPU-5c2f4a8e-0000-0000-0000-000000000001", rule_version="v1-ecc-growth",
    window_days=7, t0=OPENED - timedelta(minutes=2), window_end=OPENED + timedelta(days=7),
    signal="ecc_corrected_growth", layer="trend",
    evidence="[trend] ecc_corrected_growth: correctable ECC +108 in the last 24h",
    prediction_status="pending", outcome=None, node_gpus=(3,),
)
RESEND = timedelta(seconds=60)


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_labels_are_node_scoped_and_stable() -> None:
    assert payload.alert_labels(ALERT) == {"alertname": "GPU_FAULT_PREDICTED",
                                           "node": "gpu-node-01", "severity": "warning",
                                           "tenant": "team-a"}
    assert "tenant" not in payload.alert_labels(replace(ALERT, tenant=None))
    hit = replace(ALERT, prediction_status="hit", outcome="+1", node_gpus=(1, 3))
    assert payload.alert_labels(hit) == payload.alert_labels(ALERT)  # same AM fingerprint


def test_wording_says_predicted_and_hardware_counters() -> None:
    for status in ("pending", "hit", "miss", "voided"):
        alert = replace(ALERT, prediction_status=status, outcome="x")
        notes = payload.alert_annotations(alert)
        summary = notes["summary"]
        assert "predicted" in summary and "hardware error counters" in summary
        assert "fail" not in summary.lower() and "memory usage" not in summary
        assert "not about memory usage" in notes["description"] or \
            "not memory usage" in notes["description"]
        assert "awaiting calibration" in notes["description"]
        assert "fail" not in notes["description"].lower()
    assert "This is a prediction, not an observed fault" in \
        payload.alert_annotations(ALERT)["description"]
    hit = payload.alert_annotations(replace(ALERT, prediction_status="hit", outcome="0 -> 1"))
    assert "observed inside the window (hit: 0 -> 1)" in hit["description"]
    assert "stays open until an operator resolves it" in hit["description"]
    voided = payload.alert_annotations(replace(ALERT, prediction_status="voided", outcome="x"))
    assert "this is not a recovery" in voided["description"]


def test_annotations_carry_window_evidence_and_rule_version() -> None:
    notes = payload.alert_annotations(ALERT)
    assert notes["window"] == "7d: 2026-01-10T11:58:00.000Z to 2026-01-17T12:00:00.000Z"
    assert notes["evidence"] == ALERT.evidence
    assert (notes["rule_version"], notes["prediction_id"], notes["gpu"], notes["uuid"]) == \
        ("v1-ecc-growth", "p1", "3", ALERT.gpu_uuid)
    assert notes["prediction_status"] == "pending" and notes["signal"] == "ecc_corrected_growth"
    assert all(isinstance(v, str) and v for v in notes.values())
    several = payload.alert_annotations(replace(ALERT, node_gpus=(0, 3)))
    assert "live prediction: GPU 0, 3" in several["description"]


def test_a_vanished_prediction_reads_unknown_not_zero() -> None:
    gone = replace(ALERT, gpu_index=None, gpu_uuid=None, rule_version=None, window_days=None,
                   t0=None, window_end=None, evidence=None, prediction_status=None, signal=None)
    notes = payload.alert_annotations(gone)
    assert notes["gpu"] == notes["uuid"] == notes["window"] == notes["evidence"] == "unknown"
    assert "GPU unknown" in notes["summary"]


def test_firing_ends_four_resend_intervals_ahead_and_resolved_at_the_close() -> None:
    now = OPENED + timedelta(minutes=30)
    body = payload.firing(ALERT, now=now, resend_interval=RESEND,
                          external_url="http://ev.example:10347/")
    assert _ts(body["startsAt"]) == OPENED
    assert _ts(body["endsAt"]) == now + 4 * RESEND
    assert body["generatorURL"] == \
        "http://ev.example:10347/api/v1/gpu-health/predictions?node_id=gpu-node-01"
    closed = replace(ALERT, closed_at=now)
    assert _ts(payload.resolved(closed, external_url="http://e")["endsAt"]) == now
    # Alertmanager refuses endsAt <= startsAt ("start time must be before end time").
    instant = replace(ALERT, closed_at=OPENED)
    assert _ts(payload.resolved(instant, external_url="http://e")["endsAt"]) > OPENED


def test_generator_url_quotes_the_node() -> None:
    assert payload.generator_url("http://e:1", "rack 7/node#2") == \
        "http://e:1/api/v1/gpu-health/predictions?node_id=rack%207%2Fnode%232"


def test_shape_matches_the_body_alertmanager_accepted() -> None:
    accepted = json.loads((require_shared() / "alerting" /
                           "sidecar-post-api-v2-alerts-accepted-by-am-0.25.0.json").read_text())
    ours = [payload.firing(ALERT, now=OPENED, resend_interval=RESEND, external_url="http://e")]
    assert [set(a) for a in ours] == [set(a) for a in accepted]
    for mine, theirs in zip(ours, accepted, strict=True):
        for key in ("labels", "annotations"):
            assert all(isinstance(v, str) for v in mine[key].values())
            assert all(isinstance(v, str) for v in theirs[key].values())
        assert mine["labels"]["alertname"] == theirs["labels"]["alertname"]
        assert mine["labels"]["severity"] == theirs["labels"]["severity"]
        # Same timestamp style as Prometheus' notifier: RFC 3339 UTC with a Z.
        assert mine["startsAt"].endswith("Z") and mine["endsAt"].endswith("Z")
        assert _ts(mine["endsAt"]) > _ts(mine["startsAt"])
        assert _ts(theirs["endsAt"]) - _ts(theirs["startsAt"]) == 4 * RESEND


def test_the_card_s_recommended_action_is_an_annotation_worded_as_a_recommendation() -> None:
    from gpu_health.evaluator.alerts.alert_loop import AlertState, with_actions
    from gpu_health.evaluator.rules.actions import Recommendation

    assert ALERT.gpu_index is not None
    state = AlertState(open=(ALERT,), closing=(), opened=(), removed=())
    rec = Recommendation("reset_gpu", "a row remap is pending", "nvidia-memory-v1")
    [alert] = with_actions(state, {(ALERT.node_id, ALERT.gpu_index): rec}).open
    annotations = payload.alert_annotations(alert)
    assert annotations["recommended_action"] == (
        "reset_gpu: a row remap is pending (recommended by nvidia-memory-v1, not a diagnosis)")
    assert payload.alert_labels(alert) == payload.alert_labels(ALERT)  # identity unchanged
    [uncovered] = with_actions(state, {}).open
    assert payload.alert_annotations(uncovered)["recommended_action"].startswith("unknown")
