"""rules/prometheus: each alerting rule file passes the real ``promtool check rules`` and its
unit tests (``promtool test rules``), every alert has a unit test, and every metric the rules
read is one the exporter or the evaluator actually exposes (documented names).

Two files: ``gpu-health.rules.yml`` watches the pipeline, ``gpu-hardware.rules.yml`` the cards.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.promtool import promtool as promtool_path
from tests.shared import require_shared

REPO = Path(__file__).resolve().parents[3]
FOLDER = REPO / "rules" / "prometheus"
FILES = ("gpu-health", "gpu-hardware")


def promtool(*args: str, cwd: Path = FOLDER) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool_path(), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def rules(name: str) -> Path:
    return FOLDER / f"{name}.rules.yml"


def alerts(name: str) -> dict[str, dict[str, object]]:
    groups = yaml.safe_load(rules(name).read_text())["groups"]
    return {r["alert"]: r for g in groups for r in g["rules"]}


def test_the_folder_holds_exactly_the_rule_files_and_their_tests() -> None:
    assert sorted(p.name for p in FOLDER.iterdir()) == sorted(
        f"{n}.rules{t}.yml" for n in FILES for t in ("", ".test"))


def test_alert_names_are_unique_across_files() -> None:
    names = [a for n in FILES for a in alerts(n)]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", FILES)
def test_rules_are_valid(name: str) -> None:
    result = promtool("check", "rules", rules(name).name)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", FILES)
def test_rule_unit_tests_pass(name: str) -> None:
    result = promtool("test", "rules", f"{name}.rules.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("name", FILES)
def test_every_alert_is_tested_firing_and_has_text(name: str) -> None:
    tests = yaml.safe_load((FOLDER / f"{name}.rules.test.yml").read_text())
    assert tests["rule_files"] == [rules(name).name]
    fired = {t["alertname"] for group in tests["tests"] for t in group["alert_rule_test"]
             if t["exp_alerts"]}
    silent = {t["alertname"] for group in tests["tests"] for t in group["alert_rule_test"]
              if not t["exp_alerts"]}
    found = alerts(name)
    assert fired == set(found)
    if name == "gpu-hardware":
        assert silent == set(found), "each is also checked silent before its for: passed"
    for alert, rule in found.items():
        labels, notes = rule["labels"], rule["annotations"]
        assert isinstance(labels, dict) and isinstance(notes, dict)
        assert labels["severity"] in ("warning", "critical"), alert
        assert notes["summary"] and notes["description"], alert
        assert "for" in rule, f"{alert}: every rule waits before firing (no flapping pages)"


@pytest.mark.parametrize("name", FILES)
def test_no_rule_turns_an_absent_metric_into_zero(name: str) -> None:
    """Absent is unknown, never healthy: no ``or vector(0)``, no ``absent(...) == 0``."""
    for alert, rule in alerts(name).items():
        expr = str(rule["expr"])
        assert "vector(0)" not in expr and "> bool" not in expr, alert


@pytest.mark.parametrize("name", FILES)
def test_rules_read_only_metrics_that_exist(name: str) -> None:
    documented = "".join((REPO / "docs" / doc).read_text()
                         for doc in ("exporter.md", "alerting.md", "dashboards.md", "actions.md"))
    exprs = " ".join(str(r["expr"]) for r in alerts(name).values())
    for metric in set(re.findall(r"\b(?:gpu_health_[a-z_]+|DCGM_FI_[A-Z_]+)", exprs)):
        assert metric in documented or metric.removesuffix("_total") in documented, metric


def test_the_dcgm_names_the_rules_read_are_in_dcgm_exporters_counter_list() -> None:
    """dcgm-exporter's own default list (../shared/fixtures/dcgm, at d5e5f510) names each, as a
    counter, whether it ships on or commented out."""
    listed = (require_shared() / "dcgm" /
              "dcgm-exporter-default-counters-d5e5f510.csv").read_text()
    exprs = " ".join(str(r["expr"]) for r in alerts("gpu-hardware").values())
    names = set(re.findall(r"\bDCGM_FI_[A-Z_]+", exprs))
    assert len(names) == 4
    for name in names:
        assert re.search(rf"^#? ?{name},\s*counter,", listed, re.MULTILINE), name
