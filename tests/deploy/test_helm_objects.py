"""What the chart's objects do, read from ``helm template``: the exporter's security and its
xid mode (argv parsed by the exporter's own parser), the monitors' labels and relabelings and the
tokens the evaluator would accept (test_helm_evaluator.py has the evaluator's side)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_health.evaluator.http.api.auth import parse_tokens
from gpu_health.exporter.settings import parse_args
from tests.deploy.chart_support import TOKEN, VALUE_SETS, by_kind, one, template


def container(doc: dict[str, Any]) -> dict[str, Any]:
    [c] = doc["spec"]["template"]["spec"]["containers"]
    return c


def exporter_settings(docs: list[dict[str, Any]]) -> Any:
    c = container(one(docs, "DaemonSet"))
    assert c["command"] == ["gpu-health-exporter"]
    return parse_args(c["args"], environ={})


def test_exporter_defaults_run_on_gpu_nodes_without_privilege(tmp_path: Path) -> None:
    docs = template(VALUE_SETS["defaults"], tmp_path)
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod["runtimeClassName"] == "nvidia" and pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    c = container(one(docs, "DaemonSet"))
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "privileged": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    assert "nvidia.com/gpu" not in json.dumps(c["resources"]), "never takes a GPU"
    assert "volumes" not in pod and "volumeMounts" not in c
    settings = exporter_settings(docs)
    assert (settings.listen_port, settings.collect_interval_s) == (10346, 60.0)
    assert (settings.kmsg_path, settings.dmesg, settings.journalctl) == ("", "", "")


def test_runtime_class_is_overridable(tmp_path: Path) -> None:
    pod = one(template(VALUE_SETS["podmonitor-networkpolicy"], tmp_path),
              "DaemonSet")["spec"]["template"]["spec"]
    assert "runtimeClassName" not in pod


def test_xid_mode_grants_syslog_and_nothing_more(tmp_path: Path) -> None:
    docs = template(VALUE_SETS["xid"], tmp_path)
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 0
    assert pod["securityContext"]["runAsNonRoot"] is False
    c = container(one(docs, "DaemonSet"))
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYSLOG"]}
    assert c["securityContext"]["privileged"] is False
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert "volumes" not in pod, "no host path, no /dev/kmsg device"
    assert "hostPID" not in pod and "hostNetwork" not in pod
    settings = exporter_settings(docs)
    assert (settings.kmsg_path, settings.dmesg, settings.journalctl) == ("", "dmesg", "")
    assert settings.xid_interval_s == 10.0


def relabel_targets(endpoint: dict[str, Any]) -> dict[str, Any]:
    return {r["targetLabel"]: r.get("sourceLabels", r.get("replacement"))
            for r in endpoint["relabelings"]}


@pytest.mark.parametrize(("name", "kind", "key"), [
    ("kube-prometheus-stack", "ServiceMonitor", "endpoints"),
    ("podmonitor-networkpolicy", "PodMonitor", "podMetricsEndpoints"),
])
def test_exporter_monitor_sets_node_and_job(name: str, kind: str, key: str,
                                            tmp_path: Path) -> None:
    docs = template(VALUE_SETS[name], tmp_path)
    monitor = one(docs, kind, "exporter")
    [endpoint] = monitor["spec"][key]
    assert relabel_targets(endpoint) == {"node": ["__meta_kubernetes_pod_node_name"],
                                         "job": "gpu-health-exporter"}
    assert (endpoint["port"], endpoint["interval"], endpoint["path"]) == ("metrics", "60s",
                                                                          "/metrics")
    labels = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    if name == "kube-prometheus-stack":
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        service = one(docs, "Service", "exporter")
        assert service["spec"]["clusterIP"] == "None"
        assert monitor["spec"]["selector"]["matchLabels"].items() <= \
            service["metadata"]["labels"].items()
    else:
        assert by_kind(docs, "ServiceMonitor")[0]["metadata"]["name"].endswith("evaluator")


def secret_data(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    [secret] = [d for d in by_kind(docs, "Secret") if d["metadata"]["name"] == name]
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_evaluator_monitor_scrapes_node_data_with_the_token(tmp_path: Path) -> None:
    docs = template(VALUE_SETS["kube-prometheus-stack"], tmp_path)
    monitor = one(docs, "ServiceMonitor", "evaluator")
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/api/v1/gpu-health/metrics" and endpoint["honorLabels"] is True
    assert relabel_targets(endpoint) == {"job": "gpu-health-evaluator"}
    creds = endpoint["authorization"]["credentials"]
    assert secret_data(docs, creds["name"])[creds["key"]] == TOKEN
    accepted = parse_tokens(yaml.safe_load(
        secret_data(docs, "gh-gpu-health-evaluator-tokens")["tokens.yml"]), "rendered")
    principal = accepted.find(TOKEN)  # the evaluator accepts what Prometheus sends
    assert principal is not None and principal.scopes == frozenset({"nodes:read"})
    assert principal.tenants is None  # every tenant: the fleet's Prometheus
    selected = monitor["spec"]["selector"]["matchLabels"].items()
    labels = {s["metadata"]["name"]: s["metadata"]["labels"] for s in by_kind(docs, "Service")}
    assert selected <= labels["gh-gpu-health-evaluator"].items()
    assert not selected <= labels["gh-gpu-health-evaluator-headless"].items(), "scraped once"


def test_evaluator_without_a_token_scrapes_only_public_metrics(tmp_path: Path) -> None:
    docs = template(VALUE_SETS["defaults"], tmp_path)
    [endpoint] = one(docs, "ServiceMonitor", "evaluator")["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics" and "authorization" not in endpoint
    assert by_kind(docs, "Secret") == []
