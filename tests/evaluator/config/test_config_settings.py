"""Config file validation (every problem at once), durations, defaults, retention env."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.file import (
    DEFAULT_RETENTION_DAYS,
    default_config,
    load_config,
    parse_config,
    retention_days_from_env,
)
from gpu_health.evaluator.config.rules import MAX_SHADOW
from gpu_health.evaluator.config.targets import TargetGroup
from gpu_health.evaluator.config.values import parse_size

EXAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "evaluator.example.yml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evaluator.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_file_means_built_in_defaults() -> None:
    cfg = load_config(None, {})
    assert cfg == default_config()
    assert cfg.storage.path == Path("data/gpu-health.duckdb")
    assert cfg.static_configs == (TargetGroup(("127.0.0.1:10346",)),)
    assert cfg.web.listen_address == "127.0.0.1:10347"
    assert (cfg.scrape.interval, cfg.keepalive.total_seconds(), cfg.dedup.max_entries) == (
        60, 300, 131_072)
    assert cfg.dedup.idle_seconds == 1800 and cfg.retention_days == 180
    assert (cfg.rules.active, cfg.api.tokens_file) == ("v2-ecc-xid", None)


def test_empty_file_is_all_defaults_without_targets(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, ""), {})
    assert cfg.static_configs == () and cfg.scrape.interval == 60


def test_full_file_and_paths_relative_to_the_file(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, """
scrape: {interval: 30s, timeout: 5, max_concurrency: 8, max_response_bytes: 2MiB}
static_configs:
  - targets: ["gpu-01:10346", "[::1]:10346"]
    labels: {node: gpu-01, tenant: acme}
file_sd_configs:
  - files: [sd/*.json]
    refresh_interval: 1m
http_sd_configs:
  - url: http://cmdb.local/sd
storage: {path: db/x.duckdb}
web: {listen_address: "0.0.0.0:0"}
dedup: {max_entries: 100, idle_seconds: 10m}
keepalive_seconds: 2m
alerting: {alertmanagers: ["http://am:9093"]}
rules: {dir: myrules, active: v2-test}
api: {tokens_file: tokens.yml}
"""), {"GPU_HEALTH_RETENTION_DAYS": "30"})
    assert (cfg.scrape.interval, cfg.scrape.timeout, cfg.scrape.max_concurrency) == (30, 5, 8)
    assert cfg.scrape.max_response_bytes == 2 * 1024 * 1024
    assert cfg.static_configs[0].targets == ("gpu-01:10346", "[::1]:10346")
    assert dict(cfg.static_configs[0].labels) == {"node": "gpu-01", "tenant": "acme"}
    assert cfg.file_sd_configs[0].files == (str(tmp_path / "sd/*.json"),)
    assert cfg.file_sd_configs[0].refresh_interval == 60
    assert cfg.http_sd_configs[0].url == "http://cmdb.local/sd"
    assert cfg.http_sd_configs[0].refresh_interval == 60
    assert cfg.storage.path == tmp_path / "db/x.duckdb"
    assert (cfg.web.listen_host, cfg.web.listen_port) == ("0.0.0.0", 0)
    assert (cfg.dedup.max_entries, cfg.dedup.idle_seconds, cfg.keepalive.total_seconds()) == (
        100, 600, 120)
    assert cfg.alertmanagers == ("http://am:9093",)
    assert (cfg.rules.dir, cfg.rules.active) == (tmp_path / "myrules", "v2-test")
    assert cfg.api.tokens_file == tmp_path / "tokens.yml"
    assert cfg.retention_days == 30


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, """
scrap: {}
scrape: {interval: 10s, timeout: 20s, max_concurrency: 0, max_response_bytes: 10}
static_configs:
  - targets: ["http://gpu-01:10346", "gpu-02", "gpu-03:99999"]
    labels: {node: "", "bad-name": x, __scheme__: ftp}
  - targets: "gpu-04:10346"
file_sd_configs:
  - files: ["sd/*.txt", "*/x.json"]
    refresh_interval: soon
http_sd_configs:
  - url: ftp://nope
  - {}
storage: {path: 5}
web: {listen_address: "nohost"}
dedup: {max_entries: -1, idle_seconds: 0}
keepalive_seconds: "5 minutes"
alerting: {alertmanagers: ["am:9093"]}
rules: {dir: [], active: "has space"}
api: {tokens_file: 3}
""")
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    problems = info.value.problems
    expected = [
        "unknown key 'scrap' (did you mean 'scrape'?)",
        "scrape.timeout (20s) must not exceed scrape.interval (10s)",
        "scrape.max_concurrency", "scrape.max_response_bytes",
        "'http://gpu-01:10346' must be 'host:port' (no scheme",
        "'gpu-02' is not 'host:port'", "'gpu-03:99999' is not 'host:port'",
        "labels.node must not be empty", "'bad-name' is not a valid label name",
        "__scheme__ must be http or https", "static_configs[1].targets must be a list",
        "'sd/*.txt' must end in .json", "a glob may only be in the file name",
        "file_sd_configs[0].refresh_interval", "'ftp://nope' is not an http(s) URL",
        "http_sd_configs[1].url", "storage.path", "web.listen_address 'nohost'",
        "dedup.max_entries", "dedup.idle_seconds", "keepalive_seconds",
        "alerting.alertmanagers: 'am:9093'", "rules.dir", "rules.active", "api.tokens_file",
    ]
    for text in expected:
        assert any(text in p for p in problems), f"missing {text!r} in {problems}"
    assert str(len(problems)) in str(info.value)


@pytest.mark.parametrize(
    ("text", "reason"),
    [("scrape: [1, 2]\n", "scrape must be a mapping"), ("- a\n- b\n", "YAML mapping"),
     ("a: [\n", "not valid YAML")],
)
def test_structural_errors(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        load_config(write(tmp_path, text), {})


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yml", {})




@pytest.mark.parametrize(("value", "size"), [(2048, 2048), ("10MiB", 10 * 2**20),
                                             ("1 KB", 1000), ("10 parsecs", None), (True, None)])
def test_sizes(value: object, size: int | None) -> None:
    assert parse_size(value) == size


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "30.5", "1e3", "  ", "", "７"])
def test_bad_retention_falls_back_to_180_with_a_warning(
    raw: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert retention_days_from_env({"GPU_HEALTH_RETENTION_DAYS": raw}) == DEFAULT_RETENTION_DAYS
    assert "GPU_HEALTH_RETENTION_DAYS" in caplog.text  # an empty value is a typo too


def test_good_and_huge_retention() -> None:
    assert retention_days_from_env({"GPU_HEALTH_RETENTION_DAYS": " 30 "}) == 30
    assert retention_days_from_env({}) == DEFAULT_RETENTION_DAYS
    assert retention_days_from_env({"GPU_HEALTH_RETENTION_DAYS": "9" * 30}) == 36_500


def test_shipped_example_config_is_valid() -> None:
    cfg = load_config(EXAMPLE, {})
    assert cfg.scrape.interval == 60 and cfg.static_configs


def test_a_node_name_the_api_could_not_address_is_refused_where_it_enters(
        tmp_path: Path) -> None:
    """Before: a 10 KB node name is a config error (exit 2) or a refused discovery file,
    never a stored node that no request can name (the API's values stop at 256 characters)."""
    from gpu_health.errors import DiscoveryError
    from gpu_health.evaluator.ingest.discovery import load_groups_text

    long_node, long_host = "n" * 254, "h" * 254
    text = (f"static_configs:\n  - targets: ['{long_host}:10346']\n"
            f"  - targets: ['ok:10346']\n    labels: {{node: {long_node}}}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), {})
    problems = " ".join(caught.value.problems)
    assert "labels.node is 254 characters, more than 253" in problems
    assert "a host longer than 253" in problems
    assert long_node not in problems  # the value itself is not echoed
    with pytest.raises(DiscoveryError, match="more than 253") as refused:
        load_groups_text(f'[{{"targets": ["ok:10346"], "labels": {{"node": "{long_node}"}}}}]',
                         "sd.json")
    assert refused.value.reason == "invalid"
    config = load_config(write(tmp_path, f"static_configs:\n  - targets: ['ok:10346']\n"
                                          f"    labels: {{node: {'n' * 253}}}\n"), {})
    assert config.static_configs[0].labels == (("node", "n" * 253),)


def test_keepalive_is_the_key_and_its_old_name_still_works_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before: ``keepalive_seconds: 5m`` said seconds but took a duration."""
    with caplog.at_level(logging.WARNING, logger="gpu_health.evaluator.config.file"):
        assert parse_config({"keepalive": "2m"}, base=tmp_path).keepalive == timedelta(minutes=2)
        assert caplog.records == []
        old = parse_config({"keepalive_seconds": "3m"}, base=tmp_path)
    assert old.keepalive == timedelta(minutes=3)
    [warning] = [r.getMessage() for r in caplog.records]
    assert "keepalive_seconds is renamed keepalive" in warning
    with pytest.raises(ConfigError) as caught:
        parse_config({"keepalive": "2m", "keepalive_seconds": "3m"}, base=tmp_path)
    assert "give keepalive only" in " ".join(caught.value.problems)


def test_shadow_versions_are_bounded(tmp_path: Path) -> None:
    """50 shadow versions took a 1,600-card tick from 0.63 s to 19.8 s with no limit."""
    shadow = [f"v1-cal-{i:06x}.yaml" for i in range(MAX_SHADOW + 1)]
    with pytest.raises(ConfigError) as info:
        parse_config({"rules": {"shadow": shadow}}, base=tmp_path)
    assert f"rules.shadow: {MAX_SHADOW + 1} versions; at most {MAX_SHADOW}" in str(info.value)
    ok = parse_config({"rules": {"shadow": shadow[:MAX_SHADOW]}}, base=tmp_path)
    assert len(ok.rules.shadow) == MAX_SHADOW
