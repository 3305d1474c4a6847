"""The exporter's command-line conventions of a Prometheus exporter: ``--version``,
``--log.level`` / ``--log.format`` (the old ``--log-level`` accepted and warned), run as a real
process."""

from __future__ import annotations

import json

from gpu_health import __version__

from .support import NVIDIA_SMI
from .test_main import NO_KERNEL_LOG, run


def test_version_prints_and_exits_0(tool_env: dict[str, str]) -> None:
    result = run(["--version"], tool_env)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith(f"gpu-health-exporter, version {__version__} (python 3.")


def test_json_logs_are_one_object_per_line(tool_env: dict[str, str]) -> None:
    result = run(["--once", "--nvidia-smi", NVIDIA_SMI, "--log.format", "json",
                  "--log.level", "debug", *NO_KERNEL_LOG], tool_env)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert lines and all(set(line) >= {"ts", "level", "logger", "msg"} for line in lines)
    assert {line["level"] for line in lines} >= {"debug", "info"}
    assert all(line["ts"].endswith("Z") for line in lines)


def test_logfmt_is_the_default_and_the_old_flag_is_warned(tool_env: dict[str, str]) -> None:
    result = run(["--once", "--nvidia-smi", NVIDIA_SMI, "--log-level", "warning",
                  *NO_KERNEL_LOG], tool_env)
    assert result.returncode == 0, result.stderr
    [line] = result.stderr.splitlines()  # warnings only: the deprecation itself
    assert line.startswith("ts=") and " level=warn logger=exporter " in line
    assert 'msg="--log-level is deprecated and will be removed: use --log.level"' in line


def test_bad_log_flags_are_listed_together(tool_env: dict[str, str]) -> None:
    result = run(["--once", "--log.level", "loud", "--log.format", "xml"], tool_env)
    assert result.returncode == 2
    assert "--log.level: 'loud'" in result.stderr and "--log.format: 'xml'" in result.stderr
