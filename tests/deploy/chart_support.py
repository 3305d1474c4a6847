"""Rendering the Helm chart with the real helm for tests: value sets, ``helm template`` /
``helm lint``, the objects by kind, and the Prometheus Operator CRD schemas (from ../shared).

helm comes from ``make test`` (tests/deploy/install_helm.py puts it in .venv/bin, on PATH).
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.shared import REPO, require_shared

CHART = REPO / "deploy" / "helm" / "gpu-health"
RELEASE = "gh"
NAMESPACE = "gpu-health"
PROMETHEUS = "http://kube-prometheus-stack-prometheus.monitoring:9090"
TOKEN = "scrape-token-for-tests"
PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
TOKEN_ENTRY = {"name": "ops", "sha256": "ab" * 32, "scopes": ["nodes:read", "alerts:write"],
               "tenants": ["*"]}
CRD_KINDS = {"ServiceMonitor": "servicemonitors", "PodMonitor": "podmonitors",
             "PrometheusRule": "prometheusrules"}


def merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


_PROM = {"evaluator": {"ingest": {"source": "prometheus", "prometheus": {"url": PROMETHEUS}}}}
_RELEASE = {"additionalLabels": {"release": "kube-prometheus-stack"}}
VALUE_SETS: dict[str, dict[str, Any]] = {
    "no values": {},  # scrape the chart's own exporters, found by DNS
    "defaults": _PROM,
    "kube-prometheus-stack": merged(_PROM, {
        "exporter": {"serviceMonitor": _RELEASE},
        "evaluator": {"serviceMonitor": _RELEASE, "api": {"prometheusToken": {"value": TOKEN}},
                      "alertmanagers": ["http://alertmanager-operated.monitoring:9093"]},
        "prometheusRule": _RELEASE,
        "dashboards": {"annotations": {"grafana_folder": "GPU health"}},
    }),
    "postgresql-ha": {"evaluator": {
        "replicas": 3,
        "ingest": {"source": "scrape"},
        "storage": {"url": "postgresql://gpuhealth@postgres.db:5432/gpuhealth",
                    "password": "pg-secret"},
        "api": {"tokens": [TOKEN_ENTRY]},
        "config": {"http_sd_configs": [{"url": "http://inventory.example:8080/targets"}]},
        "alertmanagers": ["http://alertmanager-operated.monitoring:9093"],
    }},
    "postgresql-ha-prometheus": merged(_PROM, {"evaluator": {
        "replicas": 2, "storage": {"url": "postgresql://gpuhealth@postgres.db:5432/gpuhealth",
                                   "existingSecret": "pg", "existingSecretKey": "password"}}}),
    "xid": merged(_PROM, {"exporter": {"xid": {"enabled": True}}}),
    "node-problem-detector": merged(_PROM, {"nodeProblemDetector": {
        "enabled": True, "tokenFile": "/etc/gpu-health/token", "timeout": "30s"}}),
    "monitors-off": merged(_PROM, {
        "exporter": {"serviceMonitor": {"enabled": False}},
        "evaluator": {"serviceMonitor": {"enabled": False}},
        "prometheusRule": {"enabled": False}, "dashboards": {"enabled": False},
        "tests": {"enabled": False},
    }),
    "existing-secrets": merged(_PROM, {"evaluator": {
        "ingest": {"prometheus": {"bearerTokenSecret": {"name": "prom-reader", "key": "tok"}}},
        "api": {"existingSecret": "my-tokens",
                "prometheusToken": {"existingSecret": "my-scrape", "existingSecretKey": "t"}},
    }}),
    "podmonitor-networkpolicy": merged(_PROM, {
        "exporter": {"serviceMonitor": {"enabled": False}, "podMonitor": {"enabled": True},
                     "runtimeClassName": ""},
        "networkPolicy": {"enabled": True, "exporterFrom": [PEER], "evaluatorFrom": [PEER]},
        "evaluator": {"persistence": {"enabled": False}},
    }),
}


@functools.cache
def helm() -> str:
    found = shutil.which("helm") or str(Path(sys.executable).parent / "helm")
    if not Path(found).is_file():  # CI must run these: a missing helm fails, never skips
        pytest.fail("helm is not installed: `make test` installs it into .venv/bin "
                    "(tests/deploy/install_helm.py)")
    return found


def run_helm(*args: str, values: Mapping[str, Any] | None = None,
             tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [helm(), *args]
    if values is not None:
        assert tmp is not None
        file = tmp / "values.yaml"
        file.write_text(yaml.safe_dump(dict(values)))
        argv += ["-f", str(file)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def template(values: Mapping[str, Any], tmp: Path) -> list[dict[str, Any]]:
    result = run_helm("template", RELEASE, str(CHART), "-n", NAMESPACE, values=values, tmp=tmp)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def refused(values: Mapping[str, Any], tmp: Path) -> str:
    """helm's error text for values that must not render (schema or template ``fail``)."""
    result = run_helm("template", RELEASE, str(CHART), "-n", NAMESPACE, values=values, tmp=tmp)
    assert result.returncode != 0, "rendered although it must be refused"
    return result.stderr


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name_part: str = "") -> dict[str, Any]:
    [doc] = [d for d in by_kind(docs, kind) if name_part in d["metadata"]["name"]]
    return doc


def _strict(schema: Any) -> Any:
    """The API server prunes (or, with strict field validation, rejects) fields a structural
    schema does not declare; jsonschema does neither, so close every declared object."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.cache
def crd_schema(kind: str) -> dict[str, Any]:
    folder = require_shared("k8s/crds")
    crd = yaml.safe_load((folder / f"{CRD_KINDS[kind]}.yaml").read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = _strict(version["schema"]["openAPIV3Schema"])
    return schema
