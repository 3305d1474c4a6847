"""Rule files: validation (every problem at once), env overrides, effective versions, and the
start-up refusal of a rule file edited in place after it produced history. Run on v1-ecc-growth
(v2-ecc-xid and fault_xids: test_ruleset_fault_xids.py)."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpu_health.errors import ConfigError, RuleError
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.rules.ruleset import parse_ruleset
from gpu_health.evaluator.store.predictions.rule_versions import register_ruleset
from tests.evaluator.rules_support import V1_FILE, insert_prediction, open_db

NOW = datetime(2026, 1, 1, tzinfo=UTC)
FILE_TEXT = V1_FILE.read_text()


def edited(**changes: object) -> str:
    """The repository file with some keys replaced (None removes the line)."""
    text = FILE_TEXT
    for key, value in changes.items():
        pattern = re.compile(rf"^{key}:.*$\n?", re.M)
        assert pattern.search(text), key
        text = pattern.sub("" if value is None else f"{key}: {value}\n", text)
    return text


def test_repository_rule_file() -> None:
    rs = load_ruleset(V1_FILE, env={})
    assert rs.version == rs.base_version == "v1-ecc-growth"
    p = rs.params
    assert p.enabled and p.scan_interval_minutes == 30 and p.window_days == 7
    assert (p.growth_window_hours, p.baseline_days, p.ratio, p.min_increase) == (24, 7, 1.2, 32)
    assert (p.consecutive_windows, p.min_samples, p.boundary_max_age_minutes) == (3, 12, 60)
    assert (p.stats_min_matured, p.stats_min_observed_days) == (20, 8)
    assert rs.overrides == () and rs.warnings == ()
    assert len(rs.params_hash) == 64


def test_missing_enabled_means_enabled() -> None:
    rs = parse_ruleset(edited(enabled=None), env={})
    assert rs.params.enabled is True


def test_thirty_day_window_is_allowed() -> None:
    assert parse_ruleset(edited(window_days=30), env={}).params.window_days == 30


def test_bad_file_lists_every_problem() -> None:
    text = edited(window_days=14, ratio="true", min_increase="many", baseline_days=None,
                  version="'v1+x'") + "ration: 1.3\n"
    with pytest.raises(ConfigError) as err:
        parse_ruleset(text, env={}, origin="rules/bad.yaml")
    problems = "\n".join(err.value.problems)
    for needle in ("window_days: must be one of 7, 30", "ratio: must be a number",
                   "min_increase: must be an integer", "baseline_days: missing",
                   "version:", "ration: unknown key", "rules/bad.yaml"):
        assert needle in problems
    assert len(err.value.problems) == 6


@pytest.mark.parametrize("text", ["- a list", "version: [", ""])
def test_not_a_mapping_or_not_yaml(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_ruleset(text, env={})


def test_ratio_that_can_never_be_reached_is_refused() -> None:
    with pytest.raises(ConfigError, match="can never be reached"):
        parse_ruleset(edited(ratio=7.5), env={})


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_ruleset(tmp_path / "missing.yaml", env={})


def test_file_name_must_match_the_version(tmp_path: Path) -> None:
    (tmp_path / "v2-test.yaml").write_text(edited(version="v2-test"))
    assert load_ruleset(tmp_path / "v2-test.yaml", env={}).version == "v2-test"
    (tmp_path / "latest.yaml").write_text(edited(version="v2-test"))
    with pytest.raises(ConfigError, match=r"must be named v2-test\.yaml"):
        load_ruleset(tmp_path / "latest.yaml", env={})


def test_override_yields_a_distinct_deterministic_version() -> None:
    env = {"GPU_HEALTH_RULE_RATIO": "1.3"}
    rs = parse_ruleset(FILE_TEXT, env=env)
    assert re.fullmatch(r"v1-ecc-growth\+p[0-9a-f]{5}", rs.version)
    assert rs.version == f"v1-ecc-growth+p{rs.params_hash[:5]}"
    assert rs.base_version == "v1-ecc-growth" and rs.params.ratio == 1.3
    assert rs.overrides == (("ratio", 1.3),)
    assert parse_ruleset(FILE_TEXT, env=dict(env)).version == rs.version
    other = parse_ruleset(FILE_TEXT, env={"GPU_HEALTH_RULE_MIN_INCREASE": "40"})
    assert other.version != rs.version


def test_every_parameter_can_be_overridden() -> None:
    env = {
        "GPU_HEALTH_RULE_ENABLED": "off", "GPU_HEALTH_RULE_SCAN_INTERVAL_MINUTES": "10",
        "GPU_HEALTH_RULE_WINDOW_DAYS": "30", "GPU_HEALTH_RULE_GROWTH_WINDOW_HOURS": "12",
        "GPU_HEALTH_RULE_BASELINE_DAYS": "14", "GPU_HEALTH_RULE_RATIO": "1.5",
        "GPU_HEALTH_RULE_MIN_INCREASE": "16", "GPU_HEALTH_RULE_CONSECUTIVE_WINDOWS": "4",
        "GPU_HEALTH_RULE_MIN_SAMPLES": "100", "GPU_HEALTH_RULE_BOUNDARY_MAX_AGE_MINUTES": "30",
        "GPU_HEALTH_RULE_STATS_MIN_MATURED": "10", "GPU_HEALTH_RULE_STATS_MIN_OBSERVED_DAYS": "3",
        "GPU_HEALTH_RULE_FAULT_XIDS": "94,48",
    }
    p = parse_ruleset(FILE_TEXT, env=env).params
    assert (p.enabled, p.scan_interval_minutes, p.window_days, p.growth_window_hours) == \
        (False, 10, 30, 12)
    assert (p.baseline_days, p.ratio, p.min_increase, p.consecutive_windows) == (14, 1.5, 16, 4)
    assert (p.min_samples, p.boundary_max_age_minutes) == (100, 30)
    assert (p.stats_min_matured, p.stats_min_observed_days) == (10, 3)
    assert p.fault_xids == (48, 94)


def test_override_equal_to_the_file_keeps_the_version() -> None:
    rs = parse_ruleset(FILE_TEXT, env={"GPU_HEALTH_RULE_RATIO": "1.20"})
    assert rs.version == "v1-ecc-growth"


def test_operational_overrides_do_not_fork_the_version() -> None:
    env = {"GPU_HEALTH_RULE_ENABLED": "false", "GPU_HEALTH_RULE_SCAN_INTERVAL_MINUTES": "5",
           "GPU_HEALTH_RULE_STATS_MIN_MATURED": "50"}
    rs = parse_ruleset(FILE_TEXT, env=env)
    assert rs.version == "v1-ecc-growth"
    assert rs.params.enabled is False and rs.params.scan_interval_minutes == 5


@pytest.mark.parametrize(("name", "value"), [
    ("GPU_HEALTH_RULE_RATIO", "fast"), ("GPU_HEALTH_RULE_RATIO", "-1"),
    ("GPU_HEALTH_RULE_RATIO", "nan"), ("GPU_HEALTH_RULE_WINDOW_DAYS", "14"),
    ("GPU_HEALTH_RULE_MIN_INCREASE", "3.5"), ("GPU_HEALTH_RULE_ENABLED", "maybe"),
    ("GPU_HEALTH_RULE_CONSECUTIVE_WINDOWS", "0"), ("GPU_HEALTH_RULE_RATIO", "8"),
])
def test_invalid_override_falls_back_to_the_file_with_a_warning(
    name: str, value: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        rs = parse_ruleset(FILE_TEXT, env={name: value})
    assert rs.version == "v1-ecc-growth"
    assert rs.params == load_ruleset(V1_FILE, env={}).params
    assert rs.overrides == () and len(rs.warnings) == 1
    assert name.removeprefix("GPU_HEALTH_RULE_").lower() in caplog.text


def test_unknown_rule_variable_is_warned_about() -> None:
    rs = parse_ruleset(FILE_TEXT, env={"GPU_HEALTH_RULE_RATION": "1.3", "HOME": "/root"})
    assert rs.version == "v1-ecc-growth"
    assert len(rs.warnings) == 1 and "not a rule parameter" in rs.warnings[0]


def test_registration_is_idempotent_and_refuses_changed_parameters(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    original = parse_ruleset(FILE_TEXT, env={})
    register_ruleset(db, original, NOW)
    register_ruleset(db, original, NOW)
    insert_prediction(db, pid="p", node="n1", gpu=0, uuid="GPU-a", t0=NOW)  # history exists
    changed = parse_ruleset(edited(min_increase=16, ratio=1.1), env={}, origin="rules/v1.yaml")
    with pytest.raises(RuleError) as err:
        register_ruleset(db, changed, NOW)
    message = str(err.value)
    assert "'v1-ecc-growth'" in message and "rules/v1.yaml" in message
    assert "already has predictions" in message
    assert "min_increase: stored 32, now 16" in message and "ratio: stored 1.2, now 1.1" in message
    assert err.value.reason == "rule_version_changed"
    # Operational keys are not part of the version: editing them is not a conflict.
    register_ruleset(db, parse_ruleset(edited(scan_interval_minutes=5), env={}), NOW)
    # An override is a separate version with its own record.
    overridden = parse_ruleset(FILE_TEXT, env={"GPU_HEALTH_RULE_MIN_INCREASE": "16"})
    register_ruleset(db, overridden, NOW)
    rows = db.fetchall("SELECT version, base_version FROM gpu_health_rule_versions ORDER BY 1")
    assert rows == [("v1-ecc-growth", "v1-ecc-growth"), (overridden.version, "v1-ecc-growth")]
    db.close()


def test_a_version_without_predictions_may_still_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = open_db(tmp_path)
    register_ruleset(db, parse_ruleset(FILE_TEXT, env={}), NOW)
    changed = parse_ruleset(edited(min_increase=16), env={})
    with caplog.at_level(logging.WARNING):
        register_ruleset(db, changed, NOW)  # nothing was predicted under the old parameters
    assert "min_increase: stored 32, now 16" in caplog.text
    row = db.fetchone("SELECT params_hash FROM gpu_health_rule_versions")
    assert row[0] == changed.params_hash
    db.close()
