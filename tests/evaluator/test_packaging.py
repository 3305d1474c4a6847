"""Packaging: the console scripts start (the image's build-time smoke test runs the same
``--help``; no Docker engine runs here), the Dockerfile's shape (multi-stage, non-root, the
installed wheel and nothing beside it), our ports everywhere, and the deploy/ wiring (compose
services, ports, mounted paths, Prometheus/Alertmanager configs checked by promtool and amtool,
the k8s DaemonSet)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_health.evaluator.config.file import load_config
from gpu_health.evaluator.http.api.auth import hash_token
from gpu_health.resources import RULES
from tests.promtool import promtool

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
COMPOSE: dict[str, Any] = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


@pytest.mark.parametrize("argv", [
    ["gpu-health-exporter", "--help"],
    ["gpu-health-evaluator", "--help"],
    ["gpu-health-evaluator", "run", "--help"],
    ["gpu-health-evaluator", "demo", "--help"],
])
def test_console_scripts_start(argv: list[str]) -> None:
    result = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def _stages() -> list[list[str]]:
    stages: list[list[str]] = []
    for line in (REPO / "Dockerfile").read_text().replace("\\\n", " ").splitlines():
        line = line.strip()
        if line.startswith("FROM "):
            stages.append([])
        if line and not line.startswith("#") and stages:
            stages[-1].append(line)
    return stages


def test_dockerfile_is_multi_stage_non_root_with_both_programs() -> None:
    stages = _stages()
    assert len(stages) >= 2
    final = stages[-1]
    users = [line.split()[1] for line in final if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert any("gpu-health-exporter --help" in line and "gpu-health-evaluator --help" in line
               for line in final if line.startswith("RUN "))
    assert 'ENTRYPOINT ["gpu-health-evaluator"]' in final
    copies = [line.split() for line in final if line.startswith("COPY ")]
    # the installed wheel and the default config, nothing beside them
    assert copies == [["COPY", "--from=build", "/opt/gpu-health", "/opt/gpu-health"],
                      ["COPY", "deploy/evaluator.docker.yml", "/etc/gpu-health/evaluator.yml"]]
    build = " ".join(stages[0])
    assert "pip wheel --no-deps -w /dist ." in build
    assert "pip install /dist/gpu_health-*.whl" in build
    baked = load_config(DEPLOY / "evaluator.docker.yml", {})
    assert baked.rules.dir == RULES  # the packaged rule sets
    assert str(baked.storage.path).startswith("/var/lib/gpu-health/")


def test_every_copied_path_exists_and_is_not_docker_ignored() -> None:
    ignored = [p.strip() for p in (REPO / ".dockerignore").read_text().splitlines()
               if p.strip() and not p.startswith("#")]
    for stage in _stages():
        for line in stage:
            if not line.startswith("COPY ") or "--from=" in line:
                continue
            for source in line.split()[1:-1]:
                assert source not in ignored, f"{source} is in .dockerignore"
                if source == "README.md" and not (REPO / source).exists():
                    # pyproject.toml names it as the readme; the integrator writes it.
                    warnings.warn("README.md is missing: the image build needs it", stacklevel=1)
                    continue
                assert (REPO / source).exists(), source
    assert {".venv", "data", "tests/*"} <= set(ignored)


def test_our_ports_everywhere() -> None:
    """10346 (exporter) and 10347 (evaluator): outside the 9100-9999 range the Prometheus
    wiki's default port allocations fill, and not nvidia_gpu_exporter's 9835. The old ports
    appear only in prose (the upgrade notes, the peer's port) and captured output, never in a
    default, a config, the chart, a unit or a test."""
    from gpu_health.evaluator.config.file import Config
    from gpu_health.exporter.settings import Settings

    assert Settings().listen_port == 10346
    assert (Config().web.listen_host, Config().web.listen_port) == ("127.0.0.1", 10347)
    assert "EXPOSE 10346 10347" in (REPO / "Dockerfile").read_text()
    values = yaml.safe_load((DEPLOY / "helm" / "gpu-health" / "values.yaml").read_text())
    assert (values["exporter"]["port"], values["evaluator"]["port"]) == (10346, 10347)
    for unit, port in (("exporter", ":10346"), ("evaluator", None)):
        text = (DEPLOY / "systemd" / f"gpu-health-{unit}.service").read_text()
        assert port is None or f"--web.listen-address={port}" in text
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True, timeout=60).stdout.split()
    prose = ("tests/fixtures/", "docs/", "README.md", "tests/evaluator/test_packaging.py")
    old = [n for n in names if not n.startswith(prose) and (REPO / n).is_file()
           and not (REPO / n).is_symlink()
           and any(p in (REPO / n).read_bytes() for p in (b"9835", b"9836"))]
    assert old == []


def test_compose_wires_the_five_services() -> None:
    services = COMPOSE["services"]
    assert set(services) == {"exporter", "evaluator", "prometheus", "alertmanager", "grafana"}
    published = {name: s["ports"][0].split(":") for name, s in services.items()}
    assert {host for host, _, _ in published.values()} == {"127.0.0.1"}  # loopback only
    ports = {name: container for name, (_, _, container) in published.items()}
    assert ports == {"exporter": "10346", "evaluator": "10347", "prometheus": "9090",
                     "alertmanager": "9093", "grafana": "3000"}
    assert services["exporter"]["entrypoint"] == ["gpu-health-exporter"]
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), volume


def test_evaluator_config_matches_the_compose_network() -> None:
    mounted = [v for v in COMPOSE["services"]["evaluator"]["volumes"]
               if v.endswith(":/etc/gpu-health/evaluator.yml:ro")]
    [volume] = mounted
    config = load_config(DEPLOY / volume.split(":")[0], {})
    [group] = config.static_configs
    assert group.targets == ("exporter:10346",)
    assert config.alertmanagers == ("http://alertmanager:9093",)
    assert config.web.listen_port == 10347 and config.web.listen_host == "0.0.0.0"
    assert config.api.tokens_file == Path("/etc/gpu-health/tokens.yml")
    assert any(v.endswith(":/etc/gpu-health/tokens.yml:ro")
               for v in COMPOSE["services"]["evaluator"]["volumes"])
    datasource = yaml.safe_load(
        (REPO / "grafana" / "provisioning" / "datasources" / "gpu-health.yml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"


def test_prometheus_config_is_valid_and_loads_the_rules(tmp_path: Path) -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["gpu-health-exporter"]["static_configs"][0]["targets"] == ["exporter:10346"]
    assert jobs["gpu-health-evaluator"]["static_configs"][0]["targets"] == ["evaluator:10347"]
    assert jobs["gpu-health-evaluator"]["honor_labels"] is True
    evaluator = jobs["gpu-health-evaluator"]  # node data needs a token (docs/security.md)
    assert evaluator["metrics_path"] == "/api/v1/gpu-health/metrics"
    token_file = evaluator["authorization"]["credentials_file"]
    token_mount = next(v for v in COMPOSE["services"]["prometheus"]["volumes"]
                       if v.endswith(f":{token_file}:ro"))
    token = (DEPLOY / token_mount.split(":")[0]).read_text().strip()
    tokens = yaml.safe_load((DEPLOY / "tokens.example.yml").read_text())["tokens"]
    assert any(t["sha256"] == hash_token(token) and "nodes:read" in t["scopes"]
               for t in tokens)
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == \
        ["alertmanager:9093"]
    mount = next(v for v in COMPOSE["services"]["prometheus"]["volumes"]
                 if v.endswith(":/etc/prometheus/rules:ro"))
    local = [(DEPLOY / mount.split(":")[0] / Path(f).name).resolve()
             for f in config["rule_files"]]
    assert local == [REPO / "rules" / "prometheus" / n
                     for n in ("gpu-health.rules.yml", "gpu-hardware.rules.yml")]
    config["rule_files"] = [str(p) for p in local]  # the container paths do not exist here
    evaluator["authorization"]["credentials_file"] = str(DEPLOY / token_mount.split(":")[0])
    copy = tmp_path / "prometheus.yml"
    copy.write_text(yaml.safe_dump(config))
    result = subprocess.run([promtool(), "check", "config", str(copy)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_config_is_valid() -> None:
    result = subprocess.run(["/usr/bin/amtool", "check-config", str(DEPLOY / "alertmanager.yml")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_source_compose_example() -> None:
    """deploy/docker-compose.prometheus.yml: the evaluator reads dcgm-exporter's names from the
    Prometheus that scrapes it, and the counters file enables every field the set reads."""
    from gpu_health.evaluator.ingest.prometheus.metricsets import DCGM

    compose = yaml.safe_load((DEPLOY / "docker-compose.prometheus.yml").read_text())
    assert set(compose["services"]) == {"dcgm-exporter", "prometheus", "evaluator"}
    prom_mount = next(v for v in compose["services"]["prometheus"]["volumes"]
                      if v.endswith(":/etc/prometheus/prometheus.yml:ro"))
    prom = yaml.safe_load((DEPLOY / prom_mount.split(":")[0]).read_text())
    result = subprocess.run([promtool(), "check", "config",
                             str(DEPLOY / prom_mount.split(":")[0])],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    [job] = prom["scrape_configs"]
    mount = next(v for v in compose["services"]["evaluator"]["volumes"]
                 if v.endswith(":/etc/gpu-health/evaluator.yml:ro"))
    config = load_config(DEPLOY / mount.split(":")[0], {})
    source = config.ingest.prometheus
    assert config.ingest.source == "prometheus" and source is not None
    assert source.url == "http://prometheus:9090" and source.metrics == "dcgm"
    assert source.selector == f'job="{job["job_name"]}"'
    assert source.step == 15 and prom["global"]["scrape_interval"] == "15s"
    csv_mount = next(v for v in compose["services"]["dcgm-exporter"]["volumes"]
                     if v.endswith(".csv:ro"))
    assert compose["services"]["dcgm-exporter"]["command"][-1] == csv_mount.split(":")[1]
    fields = {line.split(",")[0].strip() for line in
              (DEPLOY / csv_mount.split(":")[0]).read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    wanted = {name for names in DCGM.counters.values() for name in names}
    assert wanted | {DCGM.xid_metric} <= fields


def test_ha_compose_example(tmp_path: Path) -> None:
    """deploy/docker-compose.ha.yml: PostgreSQL and two evaluators sharing one config whose
    password is the same secret file PostgreSQL reads (docs/ha.md)."""
    from gpu_health.evaluator.config.file import parse_config

    compose = yaml.safe_load((DEPLOY / "docker-compose.ha.yml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "exporter", "evaluator-a", "evaluator-b",
                             "alertmanager"}
    a, b = services["evaluator-a"], services["evaluator-b"]
    assert a["volumes"] == b["volumes"] and a["ports"] != b["ports"]
    assert a["secrets"] == ["pg-password"] == services["postgres"]["secrets"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"] == \
        "/run/secrets/pg-password"
    mount = next(v for v in a["volumes"] if v.endswith(":/etc/gpu-health/evaluator.yml:ro"))
    raw = yaml.safe_load((DEPLOY / mount.split(":")[0]).read_text())
    assert raw["storage"]["password_file"] == "/run/secrets/pg-password"
    (tmp_path / "pw").write_text("secret")
    raw["storage"]["password_file"] = "pw"  # the container's secret, here a local file
    raw["rules"]["dir"] = str(REPO / "rules")
    raw["api"]["tokens_file"] = str(DEPLOY / "tokens.example.yml")
    config = parse_config(raw, base=tmp_path)
    assert config.storage.postgres is not None and config.storage.postgres.password == "secret"
    assert config.storage.postgres.url == "postgresql://gpuhealth@postgres:5432/gpuhealth"
    assert config.ha.lease_ttl == 15


def test_the_licence_is_an_spdx_expression() -> None:
    """``license = { text = ... }`` made setuptools print a deprecation three times per install."""
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert doc["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in doc["build-system"]["requires"]  # the first to read SPDX strings
