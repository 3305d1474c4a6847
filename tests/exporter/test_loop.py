"""The collection loop with cache and collector: bad tool output, staleness, vendor isolation."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gpu_health.exporter.cache import ReadingCache
from gpu_health.exporter.collection_loop import CollectionLoop
from gpu_health.exporter.collector import build_registry
from gpu_health.exporter.sources.base import VendorSource
from gpu_health.exporter.sources.nvidia import NvidiaSource
from gpu_health.exporter.tool_output import CardReading, ParsedOutput
from gpu_health.runner import ToolRunner

from .conftest import MakeExporter
from .support import CNMON, NVIDIA_SMI, FakeClock, Scrape, scrape

CARD0 = {"gpu": "0", "uuid": "GPU-00000000-0000-0000-0000-000000000000", "vendor": "nvidia"}
INFO0 = {**CARD0, "model": "NVIDIA H100 80GB HBM3"}
HEALTH = ("gpu_health_ecc_uncorrected_total", "gpu_health_ecc_corrected_total",
          "gpu_health_retired_pages", "gpu_health_remapped_rows_pending",
          "gpu_health_remapped_rows_failure")


def errors(metrics: Scrape, reason: str, vendor: str = "nvidia") -> float | None:
    return metrics.get("gpu_health_exporter_collect_errors_total", vendor=vendor, reason=reason)


def assert_h100_values(metrics: Scrape) -> None:
    assert metrics.get("gpu_health_gpu_info", **INFO0) == 1
    assert metrics.get("gpu_health_ecc_uncorrected_total", **CARD0) == 0
    assert metrics.get("gpu_health_ecc_corrected_total", **CARD0) == 0
    assert metrics.get("gpu_health_retired_pages", **CARD0) is None  # Hopper: [N/A]
    assert metrics.get("gpu_health_remapped_rows_pending", **CARD0) == 0
    assert metrics.get("gpu_health_remapped_rows_failure", **CARD0) == 0


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("exit2", "exit_code"),
        ("exit18", "exit_code"),
        ("truncated", "parse"),
        ("extra_columns", "parse"),
        ("garbage", "parse"),
        ("hang", "timeout"),
        ("huge", "oversize"),
    ],
    ids=["invalid-field-exit2", "nvml-mismatch-exit18", "truncated-csv-no-real-capture",
         "extra-columns-no-real-capture", "binary-garbage-no-real-capture",
         "hanging-tool-no-real-capture", "50mb-output-no-real-capture"],
)
def test_bad_output_gives_absent_metrics_and_an_error_then_the_next_tick_recovers(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path, clock: FakeClock,
    mode: str, reason: str,
) -> None:
    mode_file = tmp_path / "mode"
    mode_file.write_text(mode)
    tool_env["FAKE_NVIDIA_MODE_FILE"] = str(mode_file)
    exporter = make_exporter(timeout_s=2.0, max_output_bytes=64 * 1024)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    for name in (*HEALTH, "gpu_health_gpu_info"):
        assert metrics.series(name) == [], name
    assert metrics.get("gpu_health_exporter_collect_success", vendor="nvidia") == 0
    assert errors(metrics, reason) == 1
    assert metrics.get("gpu_health_exporter_last_success_timestamp_seconds",
                       vendor="nvidia") is None
    mode_file.write_text("ok")
    clock.advance(60)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    if mode != "exit2":  # exit2 also drops the refused field (see test_sources)
        assert_h100_values(metrics)
    assert metrics.get("gpu_health_exporter_collect_success", vendor="nvidia") == 1
    assert metrics.get("gpu_health_exporter_last_success_timestamp_seconds",
                       vendor="nvidia") == clock.now.timestamp()
    assert errors(metrics, reason) == 1


def test_negative_numbers_are_absent_and_counted_card_still_listed_no_real_capture(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path
) -> None:
    mode_file = tmp_path / "mode"
    mode_file.write_text("negative")  # every "0" count becomes "-1"
    tool_env["FAKE_NVIDIA_MODE_FILE"] = str(mode_file)
    exporter = make_exporter()
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_gpu_info", **INFO0) == 1
    assert metrics.get("gpu_health_ecc_uncorrected_total", **CARD0) is None
    assert metrics.get("gpu_health_ecc_corrected_total", **CARD0) is None
    assert metrics.get("gpu_health_remapped_rows_pending", **CARD0) == 0
    # the two ECC counts and the two remapped-row counts were "0" in the capture
    assert metrics.get("gpu_health_remapped_rows_correctable", **CARD0) is None
    assert errors(metrics, "invalid_value") == 4
    assert metrics.get("gpu_health_exporter_collect_success", vendor="nvidia") == 1
    mode_file.write_text("ok")
    exporter.loop.tick()
    assert_h100_values(scrape(exporter.registry))


def test_readings_disappear_once_older_than_stale_after(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path, clock: FakeClock
) -> None:
    mode_file = tmp_path / "mode"
    tool_env["FAKE_NVIDIA_MODE_FILE"] = str(mode_file)
    exporter = make_exporter()
    exporter.loop.tick()
    good_at = clock.now
    mode_file.write_text("exit:1")
    for _ in range(3):  # three failing ticks: the cached values are still fresh enough
        clock.advance(60)
        exporter.loop.tick()
        assert_h100_values(scrape(exporter.registry))
    clock.advance(1)  # 181 s after the last good tick
    metrics = scrape(exporter.registry)
    for name in (*HEALTH, "gpu_health_gpu_info"):
        assert metrics.series(name) == [], name
    assert errors(metrics, "exit_code") == 3
    assert metrics.get("gpu_health_exporter_last_success_timestamp_seconds",
                       vendor="nvidia") == good_at.timestamp()


def test_a_loop_that_stops_ticking_goes_stale_too(
    make_exporter: MakeExporter, clock: FakeClock
) -> None:
    exporter = make_exporter(stale_after_s=90)
    exporter.loop.tick()
    clock.advance(90)
    assert_h100_values(scrape(exporter.registry))
    clock.advance(0.001)
    assert scrape(exporter.registry).series("gpu_health_gpu_info") == []


def test_an_absent_tool_disables_its_vendor_and_is_logged_once(
    make_exporter: MakeExporter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = make_exporter(nvidia=str(tmp_path / "nvidia-smi"), cnmon=CNMON)
    with caplog.at_level(logging.INFO, logger="gpu_health.exporter"):
        for _ in range(3):
            exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_exporter_vendor_enabled", vendor="nvidia") == 0
    assert metrics.get("gpu_health_exporter_collect_success", vendor="nvidia") is None
    assert errors(metrics, "not_found") is None  # no error series for a vendor not on the node
    assert metrics.get("gpu_health_exporter_vendor_enabled", vendor="cambricon") == 1
    assert sum("nvidia disabled" in r.getMessage() for r in caplog.records) == 1


def test_a_tool_that_vanishes_after_working_is_a_failure(
    make_exporter: MakeExporter, tmp_path: Path
) -> None:
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f'#!/bin/sh\nexec "{NVIDIA_SMI}" "$@"\n')
    tool.chmod(0o755)
    exporter = make_exporter(nvidia=str(tool))
    exporter.loop.tick()
    tool.unlink()
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_exporter_vendor_enabled", vendor="nvidia") == 1
    assert metrics.get("gpu_health_exporter_collect_success", vendor="nvidia") == 0
    assert errors(metrics, "not_found") == 1
    assert_h100_values(metrics)  # still fresh; ages out like any failed tick


def test_a_hanging_vendor_does_not_hold_back_the_others(
    make_exporter: MakeExporter, tool_env: dict[str, str]
) -> None:
    tool_env["FAKE_NVIDIA_MODE"] = "hang"
    exporter = make_exporter(cnmon=CNMON, timeout_s=2.0)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert errors(metrics, "timeout") == 1
    assert metrics.get("gpu_health_ecc_uncorrected_total", gpu="0", uuid="",
                       vendor="cambricon") == 0
    assert metrics.get("gpu_health_exporter_collect_success", vendor="cambricon") == 1


class _Broken(VendorSource):
    vendor = "broken"
    flag = "--broken"
    default_binary = "broken"

    def collect(self, now: datetime) -> ParsedOutput:
        raise KeyError("a bug, not a tool failure")


def _ticks(sources: list[VendorSource], clock: FakeClock, ticks: int) -> Scrape:
    """Run a collection loop over ``sources`` for ``ticks`` ticks; what /metrics then shows."""
    cache = ReadingCache(timedelta(seconds=180))
    registry = build_registry(cache, sources, clock)
    loop = CollectionLoop(sources, cache, clock, interval_s=60)
    try:
        for _ in range(ticks):
            loop.tick()
    finally:
        loop.stop()
    return scrape(registry)


def test_a_bug_in_one_vendor_is_caught_counted_and_isolated(
    tool_env: dict[str, str], clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    runner = ToolRunner(timeout_s=10, max_output_bytes=1 << 20, env=tool_env)
    with caplog.at_level(logging.ERROR):
        metrics = _ticks([_Broken("broken", runner), NvidiaSource(NVIDIA_SMI, runner)], clock, 2)
    assert errors(metrics, "internal", vendor="broken") == 2
    assert metrics.get("gpu_health_exporter_collect_success", vendor="broken") == 0
    assert_h100_values(metrics)
    assert any("broken collection crashed" in r.getMessage() and r.exc_info
               for r in caplog.records)



class _TwinSlots(VendorSource):
    """A tool listing one UUID at two indexes (no capture shows it; a hardening round tried it)."""

    vendor = "twins"
    flag = "--twins"
    default_binary = "twins"

    def collect(self, now: datetime) -> ParsedOutput:
        return ParsedOutput(tuple(CardReading("twins", gpu, "GPU-same", "X") for gpu in (0, 3)))


def test_one_uuid_at_two_indexes_is_exported_logged_and_counted(
    tool_env: dict[str, str], clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    runner = ToolRunner(timeout_s=10, max_output_bytes=1 << 20, env=tool_env)
    with caplog.at_level(logging.WARNING):
        metrics = _ticks([_TwinSlots("twins", runner)], clock, 1)
    for gpu in ("0", "3"):  # which slot is right cannot be told: both stay visible
        assert metrics.get("gpu_health_gpu_info", gpu=gpu, uuid="GPU-same", vendor="twins",
                           model="X") == 1
    assert errors(metrics, "duplicate_uuid", vendor="twins") == 1
    assert any("UUID GPU-same reported at indexes 0, 3" in r.getMessage()
               for r in caplog.records)
