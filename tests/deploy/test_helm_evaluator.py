"""The chart's evaluator as the evaluator sees it: the rendered config file, with the files
the pod mounts laid out the way the pod has them, loads with
``gpu_health.evaluator.config.file.load_config`` for every value set; the StatefulSet keeps
DuckDB on a volume and PostgreSQL replicas without one; the dashboards' ConfigMaps carry the
repository's dashboards; the NetworkPolicies; and the ``helm test`` pod's own script, run
against a real exporter and a real evaluator."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_health.evaluator.config.file import Config, load_config
from tests.deploy.chart_support import PEER, PROMETHEUS, VALUE_SETS, by_kind, one, template
from tests.e2e.stack import Procs, free_port, http, wait_for
from tests.exporter.support import NVIDIA_SMI
from tests.shared import REPO

SECRETS = "/etc/gpu-health/secrets"
DATA = "/var/lib/gpu-health"
EXISTING = {"tokens.yml": yaml.safe_dump({"tokens": [{
    "name": "ops", "sha256": "cd" * 32, "scopes": ["nodes:read"], "tenants": ["*"]}]})}


def pod_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    return spec


def secret_files(docs: list[dict[str, Any]]) -> dict[str, str]:
    """What the pod's projected secrets volume holds: path -> content (a chart-made Secret's
    value, or a stand-in for a Secret the user names)."""
    made = {d["metadata"]["name"]: d["data"] for d in by_kind(docs, "Secret")}
    [volume] = [v for v in pod_of(docs)["volumes"] if v["name"] == "secrets"]
    files: dict[str, str] = {}
    for source in volume.get("projected", {}).get("sources", []):
        secret = source["secret"]
        for item in secret["items"]:
            if secret["name"] in made:
                files[item["path"]] = base64.b64decode(made[secret["name"]][item["key"]]).decode()
            else:
                files[item["path"]] = EXISTING.get(item["path"], "stand-in-secret")
    return files


def load_rendered(docs: list[dict[str, Any]], tmp: Path) -> Config:
    [c] = pod_of(docs)["containers"]
    config_path = c["args"][c["args"].index("--config") + 1]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert Path(config_path).parent == Path(mounts["config"]) and mounts["secrets"] == SECRETS
    assert mounts["data"] == DATA
    text = one(docs, "ConfigMap", "evaluator")["data"][Path(config_path).name]
    for folder in ("secrets", "data"):
        (tmp / folder).mkdir()
    for name, content in secret_files(docs).items():
        (tmp / "secrets" / name).write_text(content)
    for pod_path, here in ((SECRETS, tmp / "secrets"), (DATA, tmp / "data")):
        text = text.replace(pod_path, str(here))
    assert "/etc/" not in text and "/var/" not in text, "every path the config names is mounted"
    (tmp / "evaluator.yml").write_text(text)
    return load_config(tmp / "evaluator.yml", {})


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_rendered_config_loads_in_the_evaluator(name: str, tmp_path: Path) -> None:
    config = load_rendered(template(VALUE_SETS[name], tmp_path), tmp_path)
    assert config.web.listen_address == "0.0.0.0:10347"
    if name == "postgresql-ha-prometheus":  # the leader reads Prometheus (docs/ha.md)
        assert config.storage.postgres is not None and config.ingest.source == "prometheus"
        assert config.ingest.prometheus is not None and config.ingest.prometheus.history is None
        return
    if name == "postgresql-ha":
        pg = config.storage.postgres
        assert pg is not None and pg.password == "pg-secret"
        assert config.ingest.source == "scrape" and len(config.http_sd_configs) == 1
        assert config.api.tokens_file is not None
        assert config.alertmanagers == ("http://alertmanager-operated.monitoring:9093",)
        return
    assert config.storage.postgres is None
    assert config.storage.path == tmp_path / "data/gpu-health.duckdb"
    if name == "no values":  # the chart's own exporters, through their headless Service
        [dns] = config.dns_sd_configs
        assert config.ingest.source == "scrape" and not config.static_configs
        assert (dns.names, dns.type, dns.port) == (("gh-gpu-health-exporter.gpu-health.svc",),
                                                   "A", 10346)
        return
    prometheus = config.ingest.prometheus
    assert config.ingest.source == "prometheus" and prometheus is not None
    assert (prometheus.url, prometheus.metrics) == (PROMETHEUS, "ours")
    assert prometheus.selector == 'job="gpu-health-exporter"'
    assert (prometheus.bearer_token is not None) == (name == "existing-secrets")
    assert (config.api.tokens_file is not None) == (
        name in ("kube-prometheus-stack", "existing-secrets"))


def test_duckdb_keeps_its_file_on_a_volume_and_postgresql_replicas_need_none(
        tmp_path: Path) -> None:
    single = one(template(VALUE_SETS["defaults"], tmp_path), "StatefulSet")["spec"]
    assert single["replicas"] == 1
    [claim] = single["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    ha = one(template(VALUE_SETS["postgresql-ha"], tmp_path), "StatefulSet")["spec"]
    assert ha["replicas"] == 3 and "volumeClaimTemplates" not in ha
    [data] = [v for v in ha["template"]["spec"]["volumes"] if v["name"] == "data"]
    assert data == {"name": "data", "emptyDir": {}}


def test_dashboards_are_configmaps_for_the_grafana_sidecar(tmp_path: Path) -> None:
    docs = template(VALUE_SETS["kube-prometheus-stack"], tmp_path)
    maps = [d for d in by_kind(docs, "ConfigMap") if "grafana_dashboard" in d["metadata"]["labels"]]
    shipped = {}
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"] == {"grafana_folder": "GPU health"}
        [(file, text)] = cm["data"].items()
        shipped[file] = json.loads(text)
    repo = {p.name: json.loads(p.read_text()) for p in (REPO / "grafana/dashboards").glob("*.json")}
    assert shipped == repo


def test_network_policies_admit_only_the_listed_peers_on_each_port(tmp_path: Path) -> None:
    docs = template(VALUE_SETS["podmonitor-networkpolicy"], tmp_path)
    policies = {p["metadata"]["labels"]["app.kubernetes.io/component"]: p["spec"]
                for p in by_kind(docs, "NetworkPolicy")}
    assert set(policies) == {"exporter", "evaluator"}
    for component, port in (("exporter", 10346), ("evaluator", 10347)):
        spec = policies[component]
        assert spec["policyTypes"] == ["Ingress"]
        assert spec["ingress"] == [{"ports": [{"port": port, "protocol": "TCP"}], "from": [PEER]}]
        assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == component
    assert by_kind(template(VALUE_SETS["defaults"], tmp_path), "NetworkPolicy") == []
    # an evaluator that scrapes the exporters itself is admitted beside the listed peers
    scraping = template({"networkPolicy": {"enabled": True, "exporterFrom": [PEER]}}, tmp_path)
    [exporter] = [p["spec"] for p in by_kind(scraping, "NetworkPolicy")
                  if p["metadata"]["labels"]["app.kubernetes.io/component"] == "exporter"]
    [ingress] = exporter["ingress"]
    assert ingress["from"][0] == PEER
    assert ingress["from"][1]["podSelector"]["matchLabels"][
        "app.kubernetes.io/component"] == "evaluator"


def test_helm_test_pod_checks_both_programs_answer(tmp_path: Path) -> None:
    """The hook pod's script, run here against a real exporter (fake nvidia-smi) and a real
    evaluator scraping it: exit 0; with the evaluator stopped: exit 1 naming it."""
    pod = one(template(VALUE_SETS["defaults"], tmp_path), "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    [c] = pod["spec"]["containers"]
    assert c["command"] == ["python3", "-c"]
    exporter_port, evaluator_port = free_port(), free_port()
    script = c["args"][0].replace(
        "http://gh-gpu-health-exporter.gpu-health.svc:10346", f"http://127.0.0.1:{exporter_port}"
    ).replace("http://gh-gpu-health-evaluator.gpu-health.svc:10347",
              f"http://127.0.0.1:{evaluator_port}")
    assert script.count("http://127.0.0.1:") == 2
    config = tmp_path / "evaluator.yml"
    config.write_text(yaml.safe_dump({
        "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"], "labels": {"node": "n1"}}],
        "storage": {"path": str(tmp_path / "db.duckdb")},
        "web": {"listen_address": f"127.0.0.1:{evaluator_port}"},
        "rules": {"dir": str(REPO / "rules")}}))
    procs = Procs(tmp_path)
    bin_dir = Path(sys.executable).parent
    try:
        procs.start("exporter", [str(bin_dir / "gpu-health-exporter"),
                                 f"--web.listen-address=127.0.0.1:{exporter_port}",
                                 f"--nvidia-smi={NVIDIA_SMI}", "--kmsg-path=", "--dmesg=",
                                 "--journalctl="])
        evaluator = procs.start("evaluator", [str(bin_dir / "gpu-health-evaluator"), "run",
                                              "--config", str(config)])
        wait_for("the evaluator to be ready", lambda: http(
            "GET", f"http://127.0.0.1:{evaluator_port}/readyz")[0] == 200 or None, 60, procs)
        ok = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=False)
        assert ok.returncode == 0, ok.stdout + ok.stderr + procs.logs()
        assert ok.stdout.count(" 200 ok") == 2
        evaluator.stop()
        down = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=60, check=False)
        assert down.returncode == 1 and f"127.0.0.1:{evaluator_port}/readyz failed" in down.stdout
    finally:
        procs.stop_all()


async def test_with_no_values_the_evaluator_finds_the_charts_exporters_by_dns(
        tmp_path: Path) -> None:
    """``helm template`` with no values: the rendered config, loaded by the evaluator's own
    loader, discovers the exporters' headless Service through a real DNS server (dnsmasq on
    loopback stands in for the cluster's DNS, answering the rendered name with one A record per
    exporter pod), and the headless Service it names is rendered."""
    from dataclasses import replace

    from gpu_health.evaluator.ingest.discovery import Discovery
    from tests.dns_support import dns_server
    from tests.evaluator.ingest_support import T0

    docs = template({}, tmp_path)
    service = one(docs, "Service", "exporter")
    assert service["spec"]["clusterIP"] == "None"
    config = load_rendered(docs, tmp_path)
    [dns] = config.dns_sd_configs
    name = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert dns.names == (name,)
    pods = [("10.1.0.7", name), ("10.1.0.8", name)]
    with dns_server(tmp_path, pods) as server:
        host, port = server.nameserver.split(":")
        # the pod's resolver is the cluster's: here the test's server, the rest as rendered
        pointed = replace(config, dns_sd_configs=(replace(dns, nameservers=((host, int(port)),)),))
        discovery = Discovery(pointed)
        await discovery.refresh(T0)
    assert discovery.ready
    assert sorted(t.address for t in discovery.targets) == ["10.1.0.7:10346", "10.1.0.8:10346"]
