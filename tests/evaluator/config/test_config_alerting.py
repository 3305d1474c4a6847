"""The ``alerting`` section and ``web.external_url`` of the evaluator config: defaults (a missing
``enabled`` means enabled), durations, and every problem listed at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.alerting import AlertingConfig
from gpu_health.evaluator.config.file import load_config
from gpu_health.resources import RULES

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evaluator.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_enabled_with_prometheus_like_timings(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "web: {listen_address: '10.0.0.5:10347'}\n"), {})
    assert cfg.alerting == AlertingConfig()
    assert cfg.alerting.enabled is True  # fail-open: absent means on
    assert (cfg.alerting.resend_interval, cfg.alerting.timeout) == (60.0, 10.0)
    assert (cfg.alerting.node_removal_grace, cfg.alerting.backlog_after) == (3600.0, 259200.0)
    assert cfg.alertmanagers == ()
    assert cfg.web.url == "http://10.0.0.5:10347"
    assert load_config(None, {}).web.url == "http://127.0.0.1:10347"


def test_every_key(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, """
web: {listen_address: "[::1]:10347", external_url: "https://gpu-health.example.com/ev/"}
alerting:
  enabled: true
  alertmanagers: ["http://am-0:9093", "https://am-1.example.com/alertmanager"]
  resend_interval: 30s
  node_removal_grace: 2h
  backlog_after: 3d
  timeout: 5s
"""), {})
    assert cfg.alerting == AlertingConfig(
        enabled=True, alertmanagers=("http://am-0:9093", "https://am-1.example.com/alertmanager"),
        resend_interval=30.0, node_removal_grace=7200.0, backlog_after=259200.0, timeout=5.0)
    assert cfg.web.url == "https://gpu-health.example.com/ev"
    disabled = load_config(write(tmp_path, "alerting: {enabled: false}\n"), {})
    assert disabled.alerting.enabled is False


def test_a_short_resend_interval_caps_the_default_timeout(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "alerting: {resend_interval: 2s}\n"), {})
    assert (cfg.alerting.resend_interval, cfg.alerting.timeout) == (2.0, 2.0)


def test_every_problem_is_listed(tmp_path: Path) -> None:
    path = write(tmp_path, """
web: {external_url: "gpu-health.example.com?x=1"}
alerting:
  enabled: "yes"
  alertmanagers: ["am:9093", 7]
  resend_interval: soon
  node_removal_grace: -1
  backlog_after: 0
  timeout: 2m
  resend: 1m
""")
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    problems = "\n".join(info.value.problems)
    for text in ("alerting.enabled must be true or false", "alerting.alertmanagers: 'am:9093'",
                 "alerting.alertmanagers must contain only non-empty strings",
                 "alerting.resend_interval", "alerting.node_removal_grace",
                 "alerting.backlog_after", "alerting.timeout (120s) must not exceed",
                 "alerting: unknown key 'resend'", "web.external_url"):
        assert text in problems, f"missing {text!r} in {problems}"


def test_the_shipped_examples_load(tmp_path: Path) -> None:
    example = load_config(REPO / "deploy" / "evaluator.example.yml", {})
    assert example.alerting.enabled
    image = load_config(REPO / "deploy" / "evaluator.docker.yml", {})
    assert image.rules.dir == RULES  # the rule sets packaged in the wheel
    assert image.api.tokens_file is None  # the API stays closed off loopback until configured
    compose = load_config(REPO / "deploy" / "evaluator.compose.yml", {})
    assert compose.alertmanagers == ("http://alertmanager:9093",)
    assert compose.web.url == "http://localhost:10347"
