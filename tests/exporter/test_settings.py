"""Command-line settings: defaults, value forms, and every problem reported at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gpu_health.errors import ConfigError
from gpu_health.exporter.cache import ReadingCache
from gpu_health.exporter.main import build_xid
from gpu_health.exporter.settings import FLAGS, Settings, argument_parser, parse_args
from gpu_health.exporter.xid_follower import MAX_BYTES_PER_POLL, MAX_LINE


def test_defaults() -> None:
    settings = parse_args([], environ={"PATH": "/usr/bin"})
    assert (settings.collect_interval_s, settings.stale_after_s, settings.tool_timeout_s) == (
        60.0, 180.0, 20.0)
    assert (settings.listen_host, settings.listen_port, settings.once) == ("", 10346, False)
    assert dict(settings.binaries) == {
        "nvidia": "nvidia-smi", "kunlunxin": "xpu-smi", "cambricon": "cnmon",
        "ascend": "npu-smi", "metax": "mx-smi", "iluvatar": "ixsmi", "enflame": "efsmi",
        "hygon": "hy-smi", "mthreads": "mthreads-gmi"}
    assert settings.tool_env == {"PATH": "/usr/bin"}
    assert settings.textfile is None and settings.log_level == "info"
    assert (settings.kmsg_path, settings.dmesg, settings.journalctl, settings.xid_interval_s) == (
        "/dev/kmsg", "dmesg", "journalctl", 10.0)


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("1.5m", 90.0), ("1h", 3600.0),
                          ("1500ms", 1.5)])
def test_duration_forms(text: str, seconds: float) -> None:
    assert parse_args(["--tool-timeout", text, "--collect-interval", "1h",
                       "--stale-after", "3h"], environ={}).tool_timeout_s == seconds


@pytest.mark.parametrize(
    ("address", "host", "port"),
    [(":10346", "", 10346), ("127.0.0.1:0", "127.0.0.1", 0), ("[::1]:9000", "::1", 9000),
     ("node-7:10346", "node-7", 10346)])
def test_listen_address_forms(address: str, host: str, port: int) -> None:
    settings = parse_args(["--web.listen-address", address], environ={})
    assert (settings.listen_host, settings.listen_port) == (host, port)


def test_vendor_flags_and_empty_value_disables(tmp_path: Path) -> None:
    settings = parse_args(["--nvidia-smi", "/opt/nv/nvidia-smi", "--xpu-smi", "",
                           "--cnmon", "cnmon", "--textfile", str(tmp_path / "g.prom"), "--once"],
                          environ={})
    assert {k: v for k, v in settings.binaries.items() if k in ("nvidia", "kunlunxin",
                                                                "cambricon")} == {
        "nvidia": "/opt/nv/nvidia-smi", "kunlunxin": "", "cambricon": "cnmon"}
    assert settings.textfile == tmp_path / "g.prom" and settings.once


def test_new_vendor_and_xid_flags() -> None:
    settings = parse_args(["--npu-smi", "/usr/local/bin/npu-smi", "--mx-smi", "", "--ixsmi",
                           "ixsmi", "--efsmi", "", "--hy-smi", "/opt/hyhal/bin/hy-smi",
                           "--mthreads-gmi", "", "--kmsg-path", "", "--dmesg", "/bin/dmesg",
                           "--journalctl", "", "--xid-interval", "30s"], environ={})
    assert {k: settings.binaries[k] for k in ("ascend", "metax", "iluvatar", "enflame", "hygon",
                                              "mthreads")} == {
        "ascend": "/usr/local/bin/npu-smi", "metax": "", "iluvatar": "ixsmi", "enflame": "",
        "hygon": "/opt/hyhal/bin/hy-smi", "mthreads": ""}
    assert (settings.kmsg_path, settings.dmesg, settings.journalctl, settings.xid_interval_s) == (
        "", "/bin/dmesg", "", 30.0)


def test_the_kernel_log_bounds_are_flags_and_reach_the_follower(tmp_path: Path) -> None:
    """Before: the per-poll read and the line cap are documented flags with defaults."""
    defaults = parse_args([], environ={})
    assert (defaults.xid_max_bytes_per_poll, defaults.xid_max_line_bytes) == (
        MAX_BYTES_PER_POLL, MAX_LINE) == (8 << 20, 64 << 10)
    settings = parse_args(["--kmsg-path", str(tmp_path / "kmsg"), "--xid-max-bytes-per-poll",
                           "1048576", "--xid-max-line-bytes", "4096"], environ={})
    follower = build_xid(settings, ReadingCache(timedelta(minutes=3)), CollectorRegistry(),
                         lambda: datetime(2026, 1, 1, tzinfo=UTC))
    assert follower is not None
    assert (follower.max_bytes_per_poll, follower.max_line_bytes) == (1 << 20, 4096)
    with pytest.raises(ConfigError) as info:
        parse_args(["--xid-max-bytes-per-poll", "0", "--xid-max-line-bytes", "100"], environ={})
    assert list(info.value.problems) == [
        "--xid-max-bytes-per-poll: '0' is not a positive integer",
        "--xid-max-line-bytes: 100 is below 1024 (a kernel log record can be that long; "
        "shorter caps would drop valid lines)"]


def test_every_problem_is_listed_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        parse_args(["--collect-interval", "60s", "--stale-after", "30s", "--tool-timeout", "2m",
                    "--max-output-bytes", "lots", "--web.listen-address", "host:99999",
                    "--log-level", "LOUD", "--xid-interval", "often", "extra"], environ={})
    problems = info.value.problems
    assert len(problems) == 7, problems
    assert any("--xid-interval" in p for p in problems)
    assert any("shorter than --collect-interval" in p for p in problems)
    assert any("longer than --collect-interval" in p for p in problems)
    assert any("'extra'" in p for p in problems)


def test_a_flag_missing_its_value_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="expected one argument"):
        parse_args(["--collect-interval"], environ={})


def test_each_flag_default_is_written_once_and_shown_in_the_help() -> None:
    """Settings' defaults are the flags' (exporter/settings.py FLAGS), as parsed from argv."""
    parsed, built = parse_args([], environ={}), Settings()
    for flag in FLAGS:
        assert getattr(parsed, flag.dest) == getattr(built, flag.dest), flag.flag
    text = argument_parser().format_help()
    for flag in FLAGS:
        if flag.kind != "text":
            assert f"({flag.default})" in text, flag.flag


def test_the_node_name_comes_from_the_flag_or_node_name_and_is_checked() -> None:
    assert parse_args([], environ={}).node_name is None  # not told: nothing exported
    assert parse_args([], environ={"NODE_NAME": "gpu-07"}).node_name == "gpu-07"
    assert parse_args(["--node-name", "gpu-08"], environ={"NODE_NAME": "gpu-07"}).node_name \
        == "gpu-08"
    for bad in ("x" * 254, " gpu-07", "a\nb"):
        with pytest.raises(ConfigError, match="not a node name"):
            parse_args(["--node-name", bad], environ={})
