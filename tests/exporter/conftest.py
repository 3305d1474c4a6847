"""Fixtures for the exporter tests (helpers live in tests/exporter/support.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpu_health.exporter.main import Exporter, build
from gpu_health.exporter.settings import Settings
from gpu_health.exporter.sources import SOURCE_CLASSES

from .support import NVIDIA_SMI, FakeClock


@pytest.fixture
def tool_env(tmp_path: Path) -> dict[str, str]:
    """The environment the fake tools run with; tests add FAKE_* variables to it.

    The venv's interpreter goes first on PATH so the fakes' ``#!/usr/bin/env python3`` starts
    fast (a pyenv shim costs ~0.1 s per call) and with the same Python as the tests.
    """
    return {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "FAKE_NVIDIA_LOG": str(tmp_path / "nvidia-smi.log"),
        "FAKE_XPU_LOG": str(tmp_path / "xpu-smi.log"),
        "FAKE_CNMON_LOG": str(tmp_path / "cnmon.log"),
        "FAKE_NPU_LOG": str(tmp_path / "npu-smi.log"),
        "FAKE_MX_LOG": str(tmp_path / "mx-smi.log"),
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


MakeExporter = Callable[..., Exporter]


@pytest.fixture
def make_exporter(tool_env: dict[str, str], clock: FakeClock) -> Iterator[MakeExporter]:
    """Build a whole exporter (sources, cache, registry, loop) around the fake tools."""
    built: list[Exporter] = []

    def make(
        *,
        nvidia: str = NVIDIA_SMI,
        xpu: str = "",
        cnmon: str = "",
        timeout_s: float = 10.0,
        max_output_bytes: int = 1024 * 1024,
        stale_after_s: float = 180.0,
        kmsg_path: str = "",
        dmesg: str = "",
        journalctl: str = "",
        **vendors: str,
    ) -> Exporter:
        """Every vendor and every kernel-log source is off unless a test names its tool."""
        binaries = dict.fromkeys((cls.vendor for cls in SOURCE_CLASSES), "")
        binaries.update(nvidia=nvidia, kunlunxin=xpu, cambricon=cnmon, **vendors)
        settings = Settings(
            tool_timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            stale_after_s=stale_after_s,
            binaries=binaries,
            tool_env=tool_env,
            kmsg_path=kmsg_path,
            dmesg=dmesg,
            journalctl=journalctl,
        )
        exporter = build(settings, clock)
        built.append(exporter)
        return exporter

    yield make
    for exporter in built:
        exporter.loop.stop()
        if exporter.xid is not None:
            exporter.xid.stop()
