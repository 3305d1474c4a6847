"""deploy/helm/gpu-health with the real helm: ``helm lint --strict`` and ``helm template`` for
every value set, each built-in object through ``kubernetes-validate --strict`` (the chart's
lowest and newest Kubernetes), each ServiceMonitor, PodMonitor and PrometheusRule through the
Prometheus Operator's own CRD schema, the rendered rules through ``promtool check rules``, and
values the schema or the templates must refuse, with a message that names the problem."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.deploy.chart_support import (
    CHART,
    CRD_KINDS,
    NAMESPACE,
    RELEASE,
    VALUE_SETS,
    by_kind,
    crd_schema,
    merged,
    one,
    refused,
    run_helm,
    template,
)
from tests.promtool import promtool
from tests.shared import REPO

KUBE_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())  # Chart.yaml: >=1.25.0-0


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["kubeVersion"] == ">=1.25.0-0"
    project = (REPO / "pyproject.toml").read_text()
    assert f'version = "{chart["appVersion"]}"' in project, "appVersion is the project's version"
    assert (CHART / "values.schema.json").is_file() and (CHART / "templates/NOTES.txt").is_file()


def test_the_chart_ships_the_repository_rules_and_dashboards() -> None:
    """files/ holds copies of rules/prometheus and grafana/dashboards (a chart must work when
    copied on its own): byte for byte the sources, never a drift. ``make chart-files``
    refreshes them."""
    files = CHART / "files"
    pairs = {files / "dashboards" / p.name: p
             for p in sorted((REPO / "grafana" / "dashboards").glob("*.json"))}
    pairs |= {files / n: REPO / "rules" / "prometheus" / n
              for n in ("gpu-health.rules.yml", "gpu-hardware.rules.yml")}
    assert sorted(p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file()) \
        == sorted(p.relative_to(files).as_posix() for p in pairs)
    stale = [str(copy.relative_to(REPO)) for copy, source in pairs.items()
             if copy.read_bytes() != source.read_bytes()]
    assert stale == [], "stale chart copies: run `make chart-files`"


def test_no_link_in_the_chart() -> None:
    """A link out of the chart folder breaks a copied chart (``lstat ...: no such file``)."""
    assert [str(p) for p in CHART.rglob("*") if p.is_symlink()] == []


def _rendered(chart: Path, tmp: Path) -> str:
    result = run_helm("template", RELEASE, str(chart), "-n", NAMESPACE,
                      values=VALUE_SETS["kube-prometheus-stack"], tmp=tmp)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_packaged_or_copied_chart_renders_as_the_folder(tmp_path: Path) -> None:
    folder = _rendered(CHART, tmp_path)
    packaged = run_helm("package", str(CHART), "-d", str(tmp_path))
    assert packaged.returncode == 0, packaged.stderr
    (tgz,) = tmp_path.glob("gpu-health-*.tgz")
    assert _rendered(tgz, tmp_path) == folder
    copied = tmp_path / "copy" / "gpu-health"
    shutil.copytree(CHART, copied, symlinks=True)
    assert _rendered(copied, tmp_path) == folder
    assert "gpu-health-fleet.json" in folder and "GpuHealth" in folder


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_lint_strict(name: str, tmp_path: Path) -> None:
    result = run_helm("lint", "--strict", str(CHART), values=VALUE_SETS[name], tmp=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_built_in_objects_validate_strictly(name: str, tmp_path: Path) -> None:
    docs = template(VALUE_SETS[name], tmp_path)
    builtin = [d for d in docs if d["kind"] not in CRD_KINDS]
    assert builtin
    for version in KUBE_VERSIONS:
        for doc in builtin:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} on {version}: {exc}")
    for doc in docs:
        assert doc["metadata"].get("namespace") == NAMESPACE, doc["metadata"]["name"]


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_operator_objects_match_the_crd_schemas(name: str, tmp_path: Path) -> None:
    docs = [d for d in template(VALUE_SETS[name], tmp_path) if d["kind"] in CRD_KINDS]
    for doc in docs:
        assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        validator = jsonschema.Draft7Validator(crd_schema(doc["kind"]))
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in validator.iter_errors(doc)]
        assert errors == [], f"{doc['kind']}/{doc['metadata']['name']}: {errors}"
    if name == "monitors-off":
        assert docs == []


def test_the_crd_check_catches_a_misspelt_field() -> None:
    schema = crd_schema("ServiceMonitor")
    bad = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
           "metadata": {"name": "x"},
           "spec": {"selector": {}, "endpoints": [{"port": "metrics", "scrapeTimout": "10s"}]}}
    assert list(jsonschema.Draft7Validator(schema).iter_errors(bad))


def test_rendered_rules_are_the_repository_rules_and_pass_promtool(tmp_path: Path) -> None:
    rule = one(template(VALUE_SETS["defaults"], tmp_path), "PrometheusRule")
    expected = [g for f in ("gpu-health.rules.yml", "gpu-hardware.rules.yml")
                for g in yaml.safe_load((REPO / "rules" / "prometheus" / f).read_text())["groups"]]
    assert rule["spec"]["groups"] == expected
    file = tmp_path / "rendered.rules.yml"
    file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    result = subprocess.run([promtool(), "check", "rules", str(file)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_rule_group_has_its_own_switch(tmp_path: Path) -> None:
    off = merged(VALUE_SETS["defaults"], {"prometheusRule": {"groups": {
        "gpu-hardware": {"enabled": False}, "gpu-health-alerting": {"enabled": False},
        "gpu-hardware-dcgm": {"enabled": False}}}})
    rule = one(template(off, tmp_path), "PrometheusRule")
    assert [g["name"] for g in rule["spec"]["groups"]] == [
        "gpu-health-exporter", "gpu-health-evaluator"]


BAD_VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "replicas on duckdb": ({"evaluator": {"replicas": 3}}, "/evaluator/storage/url"),
    "both exporter monitors": ({"exporter": {"podMonitor": {"enabled": True}}},
                               "/exporter/podMonitor/enabled"),
    "a misspelt key": ({"exporter": {"colectInterval": "30s"}}, "colectInterval"),
    "a port out of range": ({"evaluator": {"port": 70000}}, "/evaluator/port"),
    "a duration without unit": ({"exporter": {"collectInterval": "60"}},
                                "/exporter/collectInterval"),
    "a MySQL url": ({"evaluator": {"storage": {"url": "mysql://db/x"}}}, "/evaluator/storage/url"),
    "a token that is not a hash": (
        {"evaluator": {"api": {"tokens": [
            {"name": "a", "sha256": "secret", "scopes": ["nodes:read"]}]}}},
        "/evaluator/api/tokens/0/sha256"),
    "an unknown metric set": ({"evaluator": {"ingest": {"prometheus": {"metrics": "gpud"}}}},
                              "/evaluator/ingest/prometheus/metrics"),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_the_values_schema_refuses(case: str, tmp_path: Path) -> None:
    values, where = BAD_VALUES[case]
    error = refused(merged(VALUE_SETS["defaults"], values), tmp_path)
    assert "values don't meet the specifications of the schema" in error
    assert where in error, error


TEMPLATE_REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    "no prometheus url": ({"evaluator": {"ingest": {"source": "prometheus"}}},
                          "evaluator.ingest.prometheus.url is required"),
    "postgresql with a history import": (
        merged(VALUE_SETS["defaults"], {"evaluator": {
            "storage": {"url": "postgresql://u@db/x"},
            "ingest": {"prometheus": {"history": "30d"}}}}),
        "history is not offered with evaluator.storage.url"),
    "scrape without exporters or targets": ({"exporter": {"enabled": False}}, "needs targets"),
}


@pytest.mark.parametrize("case", sorted(TEMPLATE_REFUSALS))
def test_templates_refuse_a_config_the_evaluator_would_refuse(case: str, tmp_path: Path) -> None:
    values, message = TEMPLATE_REFUSALS[case]
    assert message in refused(values, tmp_path)


def test_notes_say_where_to_look(tmp_path: Path) -> None:
    result = run_helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=client",
                      values=VALUE_SETS["defaults"], tmp=tmp_path)
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    for needle in ("port-forward svc/gh-gpu-health-evaluator 10347", "/readyz",
                   "No API tokens", "No Alertmanager", "additionalLabels.release",
                   "helm test gh", "docs/kubernetes.md", "Xid errors: off"):
        assert needle in notes, needle
    assert len(by_kind(template(VALUE_SETS["defaults"], tmp_path), "DaemonSet")) == 1


DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
NAME_LIMITS = {"Service": 63, "StatefulSet": 52}  # DNS label; 52 + the revision hash label


@pytest.mark.parametrize("release", ["r" * 34, "gpu-health-" + "x" * 42],
                         ids=["34 characters", "53 characters (helm's limit)"])
def test_names_fit_kubernetes_for_any_release_name_helm_accepts(release: str,
                                                               tmp_path: Path) -> None:
    """A release name of 34+ characters rendered a headless Service name of 64+ characters
    (72 at 53), which Kubernetes refuses, so ``helm install`` failed."""
    for name, values in sorted(VALUE_SETS.items()):
        result = run_helm("template", release, str(CHART), "-n", NAMESPACE, values=values,
                          tmp=tmp_path)
        assert result.returncode == 0, result.stderr
        for doc in (d for d in yaml.safe_load_all(result.stdout) if d):
            meta, kind = doc["metadata"], doc["kind"]
            limit = NAME_LIMITS.get(kind, 253)
            assert len(meta["name"]) <= limit, (name, kind, meta["name"])
            if kind == "Service":
                assert DNS_LABEL.fullmatch(meta["name"]), meta["name"]
            labels = [*meta.get("labels", {}).values(),
                      *doc.get("spec", {}).get("template", {}).get("metadata", {})
                      .get("labels", {}).values()]
            assert all(len(str(v)) <= 63 for v in labels), (name, kind, labels)
            if kind == "StatefulSet":
                assert doc["spec"]["serviceName"].startswith(meta["name"])
