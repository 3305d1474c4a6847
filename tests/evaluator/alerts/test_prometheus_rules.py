"""rules/prometheus: the alerting rules pass the real ``promtool check rules`` and their unit
tests (``promtool test rules``), every alert has a unit test, and every metric the rules read is
one the exporter or the evaluator actually exposes (documented names)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "rules" / "prometheus" / "gpu-health.rules.yml"
TESTS = REPO / "rules" / "prometheus" / "gpu-health.rules.test.yml"
PROMTOOL = "/usr/bin/promtool"


def promtool(*args: str, cwd: Path = RULES.parent) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_rules_are_valid() -> None:
    result = promtool("check", "rules", RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rule_unit_tests_pass() -> None:
    result = promtool("test", "rules", TESTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_tested_firing_and_has_text() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    alerts = {r["alert"]: r for g in groups for r in g["rules"]}
    tests = yaml.safe_load(TESTS.read_text())["tests"]
    fired = {t["alertname"] for group in tests for t in group["alert_rule_test"]
             if t["exp_alerts"]}
    assert fired == set(alerts)
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
        assert "for" in rule, f"{name}: every rule waits before firing (no flapping pages)"


def test_rules_read_only_metrics_that_exist() -> None:
    documented = (REPO / "docs" / "exporter.md").read_text() + \
        (REPO / "docs" / "alerting.md").read_text() + (REPO / "docs" / "dashboards.md").read_text()
    exprs = " ".join(r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"]
                     for r in g["rules"])
    for name in set(re.findall(r"\bgpu_health_[a-z_]+", exprs)):
        assert name in documented or name.removesuffix("_total") in documented, name
