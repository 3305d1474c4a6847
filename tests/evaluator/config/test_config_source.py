"""The ``ingest`` section: scrape by default, or a Prometheus source validated in full."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.ingest.prometheus.source import client_options, metric_set
from gpu_health.evaluator.outbound import session_headers


def test_scrape_is_the_default() -> None:
    config = parse_config({}, base=Path())
    assert config.ingest.source == "scrape" and config.ingest.prometheus is None


def test_a_full_prometheus_source(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret-token\n")
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    config = parse_config({"ingest": {"source": "prometheus", "prometheus": {
        "url": "https://thanos.example:10902/", "metrics": "dcgm",
        "selector": 'job="dcgm",cluster="a"', "step": "30s", "lag": "90s",
        "max_catchup": "2h", "history": "30d", "timeout": "20s",
        "labels": {"node": "kubernetes_node", "tenant": "team"},
        "bearer_token_file": "token", "ca_file": "ca.pem"}}}, base=tmp_path)
    c = config.ingest.prometheus
    assert c is not None and config.ingest.source == "prometheus"
    assert (c.step, c.lag, c.max_catchup, c.history, c.timeout) == (30, 90, 7200, 30 * 86400, 20)
    assert c.bearer_token == "s3cret-token" and c.ca_file == tmp_path / "ca.pem"
    assert "s3cret" not in repr(c) and "s3cret" not in repr(config)
    ms = metric_set(c)
    assert ms.node_labels == ("kubernetes_node",) and ms.tenant_label == "team"
    assert ms.gpu_label == "gpu" and ms.uuid_label == "UUID"  # dcgm's own where not set
    options = client_options(c)
    assert session_headers(options)["Authorization"] == "Bearer s3cret-token"


def test_basic_auth_from_a_password_file(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("hunter2")
    config = parse_config({"ingest": {"source": "prometheus", "prometheus": {
        "url": "http://vm:8428", "metrics": "nvidia_smi",
        "basic_auth": {"username": "gpu-health", "password_file": "pw"}}}}, base=tmp_path)
    c = config.ingest.prometheus
    assert c is not None and c.basic_auth == ("gpu-health", "hunter2") and c.step is None
    header = session_headers(client_options(c))["Authorization"]
    assert header == "Basic Z3B1LWhlYWx0aDpodW50ZXIy"


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    with pytest.raises(ConfigError) as err:
        parse_config({
            "static_configs": [{"targets": ["gpu-1:10346"]}],
            "ingest": {"source": "prometheus", "prometheus": {
                "url": "ftp://prom", "metrics": "dcgm-exporter", "selector": '{job="x"}',
                "labels": {"hostname": "h"}, "lag": "soon", "max_points": 20_000,
                "bearer_token_file": "empty", "ca_file": "missing.pem",
                "basic_auth": {"username": "u", "password_file": "empty"}}}}, base=tmp_path)
    text = str(err.value)
    for expected in ("static_configs is set but ingest.source is 'prometheus'",
                     "ingest.prometheus.url", "ingest.prometheus.metrics must be one of",
                     "without braces", "ingest.prometheus.labels: unknown key 'hostname'",
                     "ingest.prometheus.lag", "ingest.prometheus.max_points",
                     "bearer_token_file", "is empty", "no file", "not both"):
        assert expected in text, expected


def test_unknown_source_and_a_stray_block() -> None:
    with pytest.raises(ConfigError, match=r"ingest\.source must be one of scrape, prometheus"):
        parse_config({"ingest": {"source": "thanos"}}, base=Path())
    with pytest.raises(ConfigError, match=r"set ingest\.source: prometheus"):
        parse_config({"ingest": {"prometheus": {"url": "http://p:9090"}}}, base=Path())
    with pytest.raises(ConfigError, match=r"ingest\.prometheus \(with url\) is missing"):
        parse_config({"ingest": {"source": "prometheus"}}, base=Path())
