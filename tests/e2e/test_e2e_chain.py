"""End to end with real Prometheus and Alertmanager (see tests/e2e/chain.py for the scenario).

The steps run in file order on one chain: Prometheus scrapes both programs and loads the rules;
the seeded history alone predicts nothing; the accelerating live reading makes the evaluator
push GPU_FAULT_PREDICTED, which reaches the webhook; every dashboard query runs against the
Prometheus; a later uncorrectable increase (a hit) leaves the alert active; the operator's
resolve ends it (the webhook gets "resolved").
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.e2e import dashboards
from tests.e2e.chain import (
    CORRECTED_END,
    JUMP,
    NODE,
    TENANT,
    TOKEN,
    TOKEN_NAME,
    Chain,
    start_chain,
)
from tests.e2e.stack import http

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# Panels whose queries legitimately return nothing in this scenario (why, per title).
EXPECT_EMPTY = {
    "Precision (hit rate), 7-day window": "insufficient samples: must be absent, never 0",
    "Recall, 7-day window": "insufficient samples",
    "F1, 7-day window": "insufficient samples",
    "Precision (hit rate), 30-day window": "insufficient samples",
    "Recall, 30-day window": "insufficient samples",
    "F1, 30-day window": "insufficient samples",
    "Stalled cards": "no card is stalled",
    "First-fault precision (warned before any fault)": "insufficient samples per class too",
    "First-fault recall": "insufficient samples per class",
    "Repeat precision (card had already failed)": "insufficient samples per class",
    "Cards needing action": "the replayed H100 has no row-remap problem and no memory Xid",
    "PCIe link: lanes and generation, now and at most": "the replayed H100's columns hold no "
    "pcie.link field: unknown, so no line (never 0)",
    "Clocks held down, share of time by reason": "no clocks_event_reasons_counters field "
    "either",
    "NVLink fabric registration": "nor a fabric.* field",
    "NVSwitch errors on the node (SXid), since the exporter started": "no NVSwitch logged an "
    "error: no series until the first",
    "Rule versions side by side: active and shadow (first faults, 7-day window)":
        "no shadow version is configured here (tests/evaluator/stats/test_snapshot_metrics.py "
        "checks the series with one)",
}
MAY_BE_EMPTY = {
    "Correctable ECC errors per hour": "Prometheus has under an hour of history here; the gap "
                                       "rules are tested with promtool in test_grafana_*",
    "Uncorrectable ECC errors per hour": "as above",
    "Scrape and loop errors (per 15 min)": "no error is expected",
}


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    yield from start_chain(tmp_path_factory.mktemp("e2e"))


def gpu_alerts(chain: Chain, status: str) -> list[dict[str, Any]]:
    return [a for n in chain.webhook.received() for a in n["alerts"]
            if a["labels"].get("alertname") == "GPU_FAULT_PREDICTED" and a["status"] == status]


def test_prometheus_scrapes_both_programs_and_loads_the_rules(chain: Chain) -> None:
    def both_up() -> bool:
        status, body = chain.query('up{job=~"gpu-health-.*"} == 1')
        return status == 200 and len(body["data"]["result"]) == 2

    chain.wait("Prometheus to scrape exporter and evaluator", both_up)

    def rules_ok() -> list[str] | None:
        status, body = http("GET", f"{chain.prometheus}/api/v1/rules")
        groups = body["data"]["groups"] if status == 200 else []
        rules = [r for g in groups for r in g["rules"]]
        return [r["name"] for r in rules] if rules and all(
            r["health"] == "ok" for r in rules) else None

    names = chain.wait("the alerting rules to be evaluated", rules_ok)
    assert {"GpuHealthExporterDown", "GpuHealthEvaluatorDown", "GpuHealthAlertBacklog",
            "GpuCardDisappeared", "GpuXidFallenOffBus", "GpuHealthCounterLost"} <= set(names)


def test_the_seeded_history_alone_predicts_nothing(chain: Chain) -> None:
    ticks = "gpu_health_evaluator_worker_ticks_total"
    chain.wait("three worker ticks", lambda: (chain.metric(chain.evaluator, ticks) or 0) >= 3)
    assert chain.api("predictions", node_id=NODE)["items"] == []
    assert chain.metric(chain.evaluator, "gpu_health_evaluator_alerts_open") == 0
    assert gpu_alerts(chain, "firing") == []


def test_an_accelerating_reading_pushes_gpu_fault_predicted(chain: Chain) -> None:
    chain.set_card(CORRECTED_END + JUMP, 0)
    [alert] = chain.wait("GPU_FAULT_PREDICTED at the webhook",
                         lambda: gpu_alerts(chain, "firing"), 45)
    assert alert["labels"] == {"alertname": "GPU_FAULT_PREDICTED", "node": NODE,
                               "severity": "warning", "tenant": TENANT}
    notes = alert["annotations"]
    [prediction] = chain.api("predictions", node_id=NODE)["items"]
    assert prediction["signal"] == "ecc_corrected_growth" and prediction["status"] == "pending"
    assert notes["prediction_id"] == prediction["id"]
    assert notes["rule_version"] == "v1-ecc-growth" == prediction["rule_version"]
    assert notes["gpu"] == "0" and notes["uuid"] == chain.uuid
    assert notes["window"].startswith("7d: ")
    assert "correctable ECC +108 in the last 24h" in notes["evidence"]
    assert "predicted" in notes["summary"] and "fail" not in notes["summary"].lower()
    assert "hardware error counters" in notes["summary"]
    assert "not about memory usage" in notes["description"]
    assert alert["generatorURL"] == \
        f"{chain.evaluator}/api/v1/gpu-health/predictions?node_id={NODE}"
    [active] = chain.am_alerts()
    assert active["status"]["state"] == "active"
    ends = datetime.fromisoformat(active["endsAt"].replace("Z", "+00:00"))
    assert ends > datetime.now(UTC)  # re-sent with endsAt in the future, as Prometheus does


def test_every_dashboard_query_runs_against_prometheus(chain: Chain) -> None:
    def snapshot_scraped() -> bool:
        status, body = chain.query("gpu_health_prediction_open")
        return status == 200 and bool(body["data"]["result"])

    chain.wait("Prometheus to scrape the open prediction", snapshot_scraped)
    values = {"node": NODE, "gpu": "0"}
    failures: list[str] = []
    checked = 0
    for name, dashboard in dashboards.all_dashboards().items():
        for var, query in dashboards.variables(dashboard).items():
            selector, label = dashboards.label_values(dashboards.substitute(query, values))
            status, body = chain.query(selector)
            found = {r["metric"].get(label) for r in body["data"]["result"]} if status == 200 \
                else set()
            if values[var] not in found:
                failures.append(f"{name} variable {var}: {query} gave {found}")
        for q in dashboards.queries(name, dashboard):
            expr = dashboards.substitute(q.expr, values)
            status, body = chain.query(expr)
            checked += 1
            where = f"{name} panel {q.panel_id} {q.panel!r} {q.ref}: {expr}"
            if status != 200 or body.get("status") != "success":
                failures.append(f"{where}: HTTP {status} {body}")
                continue
            result = body["data"]["result"]
            if q.panel in EXPECT_EMPTY and result:
                failures.append(f"{where}: expected no data ({EXPECT_EMPTY[q.panel]}), "
                                f"got {result}")
            elif q.panel not in EXPECT_EMPTY and q.panel not in MAY_BE_EMPTY and not result:
                failures.append(f"{where}: no data although the scenario has some")
    assert checked > 40
    titles = {q.panel for d in dashboards.all_dashboards().items() for q in dashboards.queries(*d)}
    assert set(EXPECT_EMPTY) | set(MAY_BE_EMPTY) <= titles  # no stale exemption
    assert not failures, "\n".join(failures)


def test_a_hit_does_not_resolve_the_alert(chain: Chain) -> None:
    chain.set_card(CORRECTED_END + JUMP, 1)  # the predicted fault: uncorrectable 0 -> 1

    def hit() -> bool:
        items = chain.api("predictions", node_id=NODE)["items"]
        return bool(items) and items[0]["status"] == "hit"

    chain.wait("the backfill to mark the prediction a hit", hit, 45)

    def am_saw_the_hit() -> bool:
        alerts = chain.am_alerts()
        return len(alerts) == 1 and alerts[0]["annotations"]["prediction_status"] == "hit"

    chain.wait("Alertmanager to get the updated alert", am_saw_the_hit)
    pushes = ("gpu_health_evaluator_alert_pushes_total"
              f'{{alertmanager="{chain.alertmanager}",result="ok"}}')
    seen = chain.metric(chain.evaluator, pushes) or 0
    chain.wait("two more resends",
               lambda: (chain.metric(chain.evaluator, pushes) or 0) >= seen + 2)
    [alert] = chain.am_alerts()
    assert alert["status"]["state"] == "active"
    assert "observed inside the window (hit:" in alert["annotations"]["description"]
    # the card's recommended action travels with the alert, named as a recommendation
    assert "recommended by nvidia-memory-v2" in alert["annotations"]["recommended_action"]
    assert gpu_alerts(chain, "resolved") == []
    assert chain.metric(chain.evaluator, "gpu_health_evaluator_alerts_open") == 1


def test_the_operator_resolve_ends_it(chain: Chain) -> None:
    url = f"{chain.evaluator}/api/v1/gpu-health/alerts/{NODE}/resolve"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    status, body = http("POST", url, {"reason": ""}, headers)
    assert status == 400 and body["param"] == "reason"
    status, body = http("POST", url, {"reason": "GPU 0 drained and replaced, OPS-42"}, headers)
    assert status == 200, body
    assert body["closed_by"] == TOKEN_NAME and body["reason"].endswith("OPS-42")
    [resolved] = chain.wait("the resolved notification", lambda: gpu_alerts(chain, "resolved"),
                            30)
    assert resolved["labels"]["node"] == NODE
    chain.wait("Alertmanager to drop the active alert", lambda: not [
        a for a in chain.am_alerts() if a["status"]["state"] == "active"])
    assert chain.metric(chain.evaluator, "gpu_health_evaluator_alerts_open") == 0
    assert chain.api("predictions", node_id=NODE)["items"][0]["status"] == "hit"
    assert http("POST", url, {"reason": "again"}, headers)[0] == 409
