"""Vendor sources through the fake tools: probe cache, one query per tick, refused fields."""

from __future__ import annotations

from pathlib import Path

from gpu_health.exporter.parsers import nvidia
from gpu_health.exporter.sources.nvidia import FIELD_SUPPORTED_METRIC
from tests.shared import FIXTURES

from .conftest import MakeExporter
from .support import CNMON, XPU_SMI, FakeClock, invocations, nvidia_queries, scrape

# The row-remap details this help text lists (the project's 590.48.01 fixture lists the two
# remapped-row counts); the fake refuses the LAST field asked for in its exit2 mode.
REMAP_ROWS = ["remapped_rows.correctable", "remapped_rows.uncorrectable"]
REFUSED = REMAP_ROWS[-1]
CARD0 = {"gpu": "0", "uuid": "GPU-00000000-0000-0000-0000-000000000000", "vendor": "nvidia"}


def test_probe_is_cached_for_30_minutes_and_each_tick_runs_one_query(
    make_exporter: MakeExporter, clock: FakeClock, tool_env: dict[str, str]
) -> None:
    exporter = make_exporter()
    for _ in range(3):
        exporter.loop.tick()
        clock.advance(60)
    clock.advance(30 * 60)
    exporter.loop.tick()
    calls = invocations(Path(tool_env["FAKE_NVIDIA_LOG"]))
    kinds = [{"--help-query-gpu": "probe", "-q": "replays", "nvlink": "links"}.get(argv[0],
                                                                                  "query")
             for argv in calls]
    assert kinds == ["probe", "query", "replays", "links", *["query", "replays", "links"] * 2,
                     "probe", "query", "replays", "links"]
    query = calls[1]
    assert query[0] == "--query-gpu=" + ",".join(
        ["index", "name", "uuid", "pci.bus_id", *nvidia.HEALTH_FIELDS, *REMAP_ROWS,
         nvidia.PAGES_PENDING])  # 590 lists retired_pages.pending, not gpu_recovery_action
    assert query[1] == "--format=csv,noheader,nounits"


def test_old_driver_help_without_remap_fields_never_queries_them(
    make_exporter: MakeExporter, tool_env: dict[str, str]
) -> None:
    tool_env["FAKE_NVIDIA_HELP"] = str(FIXTURES / "nvidia-smi-help-query-gpu-466-windows.txt")
    exporter = make_exporter()
    exporter.loop.tick()
    query = invocations(Path(tool_env["FAKE_NVIDIA_LOG"]))[1][0]
    assert "remapped_rows" not in query
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_ecc_corrected_total", **CARD0) == 0
    assert metrics.get("gpu_health_remapped_rows_pending", **CARD0) is None
    assert metrics.get(FIELD_SUPPORTED_METRIC, field=nvidia.REMAP_PENDING) == 0
    assert metrics.get(FIELD_SUPPORTED_METRIC, field=nvidia.ECC_CORRECTED) == 1


def test_field_refused_despite_help_is_dropped_and_the_next_tick_recovers_no_real_capture(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path
) -> None:
    mode = tmp_path / "mode"
    tool_env["FAKE_NVIDIA_MODE_FILE"] = str(mode)
    mode.write_text(f"exit2:{REFUSED}")  # the driver refuses a field its help lists
    exporter = make_exporter()
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_exporter_collect_success", vendor="nvidia") == 0
    assert metrics.get("gpu_health_exporter_collect_errors_total",
                       vendor="nvidia", reason="exit_code") == 1
    assert metrics.series("gpu_health_gpu_info") == []
    mode.write_text("ok")
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_exporter_collect_success", vendor="nvidia") == 1
    assert metrics.get(FIELD_SUPPORTED_METRIC, field=REFUSED) == 0
    assert metrics.get("gpu_health_remapped_rows_uncorrectable", **CARD0) is None
    assert metrics.get("gpu_health_remapped_rows_pending", **CARD0) == 0
    last_query = nvidia_queries(Path(tool_env["FAKE_NVIDIA_LOG"]))[-1][0]
    assert REFUSED not in last_query


def test_a_refused_field_is_queried_again_after_the_30_minute_probe_no_real_capture(
    make_exporter: MakeExporter, clock: FakeClock, tool_env: dict[str, str], tmp_path: Path
) -> None:
    mode = tmp_path / "mode"
    tool_env["FAKE_NVIDIA_MODE_FILE"] = str(mode)
    mode.write_text(f"exit2:{REFUSED}")  # refused once (a driver reload, say), same help text
    exporter = make_exporter()
    exporter.loop.tick()
    mode.write_text("ok")
    clock.advance(29 * 60)
    exporter.loop.tick()  # still inside the probe's 30 minutes: queried without the field
    assert REFUSED not in nvidia_queries(Path(tool_env["FAKE_NVIDIA_LOG"]))[-1][0]
    clock.advance(2 * 60)
    exporter.loop.tick()  # the probe ran again: every listed field gets its chance back
    calls = nvidia_queries(Path(tool_env["FAKE_NVIDIA_LOG"]))
    assert calls[-2] == ["--help-query-gpu"] and REFUSED in calls[-1][0]
    metrics = scrape(exporter.registry)
    assert metrics.get(FIELD_SUPPORTED_METRIC, field=REFUSED) == 1
    assert metrics.get("gpu_health_remapped_rows_uncorrectable", **CARD0) == 0


def test_probe_failure_is_counted_as_probe_and_retried_next_tick(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path
) -> None:
    mode = tmp_path / "help-mode"
    tool_env["FAKE_NVIDIA_HELP_MODE_FILE"] = str(mode)
    exporter = make_exporter()
    for bad in ("garbage", "exit:9", "empty"):
        mode.write_text(bad)
        exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_exporter_collect_errors_total",
                       vendor="nvidia", reason="probe") == 3
    assert metrics.get(FIELD_SUPPORTED_METRIC, field=nvidia.ECC_CORRECTED) is None
    mode.write_text("ok")
    exporter.loop.tick()
    assert scrape(exporter.registry).get("gpu_health_ecc_uncorrected_total", **CARD0) == 0


def test_state_file_overrides_counters_and_adds_cards(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path
) -> None:
    state = tmp_path / "state.json"
    state.write_text('{"cards": {"0": {"ecc.errors.corrected.aggregate.total": 40,'
                     ' "retired_pages.sbe": 1, "retired_pages.dbe": 2},'
                     ' "1": {"remapped_rows.pending": "Yes"}}}')
    tool_env["FAKE_NVIDIA_STATE"] = str(state)
    exporter = make_exporter()
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_ecc_corrected_total", **CARD0) == 40
    assert metrics.get("gpu_health_retired_pages", **CARD0) == 3
    card1 = {"gpu": "1", "uuid": "GPU-00000000-0000-0000-0000-000000000001", "vendor": "nvidia"}
    assert metrics.get("gpu_health_remapped_rows_pending", **card1) == 1
    assert metrics.get("gpu_health_retired_pages", **card1) is None


def test_kunlunxin_table_fallback_and_cambricon_through_their_fake_tools(
    make_exporter: MakeExporter, tool_env: dict[str, str]
) -> None:
    tool_env["FAKE_XPU_XML_MODE"] = "exit:2"  # a tool without -q -x: the table is read
    exporter = make_exporter(nvidia="", xpu=XPU_SMI, cnmon=CNMON)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    for vendor, model in (("kunlunxin", "P800 OAM"), ("cambricon", "MLU370-X8")):
        for gpu in ("0", "1"):
            assert metrics.get("gpu_health_gpu_info", gpu=gpu, uuid="", vendor=vendor,
                               model=model) == 1
            assert metrics.get("gpu_health_ecc_uncorrected_total", gpu=gpu, uuid="",
                               vendor=vendor) == 0
            assert metrics.get("gpu_health_ecc_corrected_total", gpu=gpu, uuid="",
                               vendor=vendor) is None
    assert metrics.get("gpu_health_exporter_vendor_enabled", vendor="nvidia") == 0
    assert invocations(Path(tool_env["FAKE_XPU_LOG"])) == [["-q", "-x"], []]
    assert len(invocations(Path(tool_env["FAKE_CNMON_LOG"]))) == 1
