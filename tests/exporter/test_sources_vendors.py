"""The vendors beyond NVIDIA through their fake tools and a whole exporter: Kunlunxin XML
mode and fallback, Intel's xpu-smi, Ascend per-card queries under one deadline, MetaX, and the
listing-only vendors."""

from __future__ import annotations

from pathlib import Path

from tests.shared import FIXTURES

from .conftest import MakeExporter
from .support import (
    EFSMI,
    HY_SMI,
    IXSMI,
    MTHREADS_GMI,
    MX_SMI,
    NPU_SMI,
    XPU_SMI,
    FakeClock,
    Scrape,
    invocations,
    scrape,
)

KUNLUN0 = {"gpu": "0", "uuid": "GPU-11111111-2222-3333-4444-000000000000", "vendor": "kunlunxin"}


def errors(metrics: Scrape, vendor: str, reason: str) -> float | None:
    return metrics.get("gpu_health_exporter_collect_errors_total", vendor=vendor, reason=reason)


def test_kunlunxin_xml_mode_exports_the_correctable_counter_and_uuid(
    make_exporter: MakeExporter, tool_env: dict[str, str]
) -> None:
    exporter = make_exporter(nvidia="", xpu=XPU_SMI)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_gpu_info", **KUNLUN0, model="P800 OAM") == 1
    assert metrics.get("gpu_health_ecc_corrected_total", **KUNLUN0) == 0
    assert metrics.get("gpu_health_ecc_uncorrected_total", **KUNLUN0) == 0
    assert metrics.get("gpu_health_retired_pages", **KUNLUN0) is None
    assert invocations(Path(tool_env["FAKE_XPU_LOG"])) == [["-q", "-x"]]  # no table run


def test_kunlunxin_without_xml_mode_reads_the_table_and_retries_xml_after_30_minutes(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path, clock: FakeClock
) -> None:
    mode = tmp_path / "xml-mode"
    mode.write_text("exit:2")
    tool_env["FAKE_XPU_XML_MODE_FILE"] = str(mode)
    exporter = make_exporter(nvidia="", xpu=XPU_SMI)
    for _ in range(3):
        exporter.loop.tick()
        clock.advance(60)
    metrics = scrape(exporter.registry)
    table_card = {"gpu": "0", "uuid": "", "vendor": "kunlunxin"}
    assert metrics.get("gpu_health_ecc_uncorrected_total", **table_card) == 0
    assert metrics.get("gpu_health_ecc_corrected_total", **table_card) is None
    assert errors(metrics, "kunlunxin", "exit_code") == 0  # falling back is not an error
    mode.write_text("ok")
    clock.advance(30 * 60)
    exporter.loop.tick()
    assert invocations(Path(tool_env["FAKE_XPU_LOG"])) == [
        ["-q", "-x"], [], [], [], ["-q", "-x"]]
    assert scrape(exporter.registry).get("gpu_health_ecc_corrected_total", **KUNLUN0) == 0


def test_intels_xpu_smi_is_refused_as_a_foreign_tool(
    make_exporter: MakeExporter, tool_env: dict[str, str]
) -> None:
    # Intel's xpu-smi rejects -q -x (CLI11, exit 2) and prints its help with no arguments.
    tool_env["FAKE_XPU_XML_MODE"] = "exit:2"
    tool_env["FAKE_XPU_TABLE"] = str(FIXTURES / "intel-xpu-smi-help-1.2.txt")
    exporter = make_exporter(nvidia="", xpu=XPU_SMI)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert errors(metrics, "kunlunxin", "foreign_tool") == 1
    assert metrics.get("gpu_health_exporter_collect_success", vendor="kunlunxin") == 0
    assert metrics.series("gpu_health_gpu_info") == []


def test_intel_output_answering_with_status_0_is_refused_too_no_real_capture(
    make_exporter: MakeExporter, tool_env: dict[str, str]
) -> None:
    tool_env["FAKE_XPU_XML"] = str(FIXTURES / "intel-xpu-smi-discovery-1.2.txt")
    exporter = make_exporter(nvidia="", xpu=XPU_SMI)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert errors(metrics, "kunlunxin", "foreign_tool") == 1
    assert metrics.series("gpu_health_gpu_info") == []
    assert invocations(Path(tool_env["FAKE_XPU_LOG"])) == [["-q", "-x"]]


def test_ascend_table_then_one_ecc_query_per_card(
    make_exporter: MakeExporter, tool_env: dict[str, str]
) -> None:
    exporter = make_exporter(nvidia="", ascend=NPU_SMI)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    for gpu, bus in (("0", "0000:C1:00.0"), ("1", "0000:C2:00.0")):
        card = {"gpu": gpu, "uuid": "", "vendor": "ascend"}
        assert bus and metrics.get("gpu_health_gpu_info", **card, model="910B2") == 1
        for name in ("ecc_corrected_total", "ecc_uncorrected_total", "retired_pages"):
            assert metrics.get(f"gpu_health_{name}", **card) == 0
        assert metrics.get("gpu_health_remapped_rows_pending", **card) is None  # none exist
    assert sorted(invocations(Path(tool_env["FAKE_NPU_LOG"]))) == [
        ["info"], ["info", "-t", "ecc", "-i", "0"], ["info", "-t", "ecc", "-i", "1"]]


def test_ascend_card_whose_query_hangs_is_unknown_and_the_others_still_count(
    make_exporter: MakeExporter, tool_env: dict[str, str]
) -> None:
    tool_env["FAKE_NPU_ECC_1_MODE"] = "hang"
    exporter = make_exporter(nvidia="", ascend=NPU_SMI, timeout_s=1.0)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    card0, card1 = ({"gpu": g, "uuid": "", "vendor": "ascend"} for g in ("0", "1"))
    assert metrics.get("gpu_health_ecc_corrected_total", **card0) == 0
    assert metrics.get("gpu_health_gpu_info", **card1, model="910B2") == 1
    assert metrics.get("gpu_health_ecc_corrected_total", **card1) is None
    assert metrics.get("gpu_health_exporter_collect_success", vendor="ascend") == 1
    assert errors(metrics, "ascend", "timeout") == 1


def _eight_card_table(tmp_path: Path) -> str:
    rows = []
    for npu in range(8):
        rows.append(f"| {npu}     910B2               | OK            | 96.4        37  |\n"
                    f"| 0                         | 0000:{0xC1 + npu:02X}:00.0  | 0          0  |\n"
                    "+===========================+===============+==========================+\n")
    head = (FIXTURES / "npu-smi-info-910B2-24.1.0.3.txt").read_text().split("| 0     910B2")[0]
    path = tmp_path / "npu-smi-info-8-cards.txt"
    path.write_text(head + "".join(rows))
    return str(path)


def test_ascend_runs_at_most_four_ecc_queries_at_once(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path
) -> None:
    running = tmp_path / "running"
    running.mkdir()
    tool_env.update(FAKE_NPU_TABLE=_eight_card_table(tmp_path), FAKE_NPU_RUNNING=str(running),
                    FAKE_NPU_ECC_DELAY="0.3")
    exporter = make_exporter(nvidia="", ascend=NPU_SMI)
    exporter.loop.tick()
    calls = [line for line in Path(tool_env["FAKE_NPU_LOG"]).read_text().splitlines()
             if '"running"' in line]
    assert len(calls) == 8
    assert max(int(line.split('"running": ')[1].rstrip("}")) for line in calls) <= 4
    metrics = scrape(exporter.registry)
    assert len(metrics.series("gpu_health_ecc_corrected_total")) == 8


def test_ascend_queries_share_one_deadline_later_cards_are_not_started(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path
) -> None:
    tool_env.update(FAKE_NPU_TABLE=_eight_card_table(tmp_path), FAKE_NPU_ECC_MODE="hang")
    exporter = make_exporter(nvidia="", ascend=NPU_SMI, timeout_s=1.0)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert errors(metrics, "ascend", "timeout") == 8
    assert len(metrics.series("gpu_health_gpu_info")) == 8  # every card still listed
    ecc_calls = [a for a in invocations(Path(tool_env["FAKE_NPU_LOG"])) if a != ["info"]]
    assert len(ecc_calls) == 4  # the first four ran into the deadline, the rest never started


def test_metax_needs_both_commands_and_lists_unusable_cards(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path
) -> None:
    list_mode = tmp_path / "list-mode"
    tool_env["FAKE_MX_LIST_MODE_FILE"] = str(list_mode)
    exporter = make_exporter(nvidia="", metax=MX_SMI)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    card0 = {"gpu": "0", "uuid": "GPU-00000000-0000-0000-0000-0000000000c5", "vendor": "metax"}
    assert metrics.get("gpu_health_retired_pages", **card0) == 0
    assert metrics.get("gpu_health_gpu_info", gpu="1", uuid="", vendor="metax",
                       model="MXC500") == 1
    assert metrics.get("gpu_health_ecc_corrected_total", gpu="1", uuid="",
                       vendor="metax") is None
    list_mode.write_text("exit:1")
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert errors(metrics, "metax", "exit_code") == 1  # no tick without the UUIDs


def test_iluvatar_and_the_listing_only_vendors(make_exporter: MakeExporter) -> None:
    exporter = make_exporter(nvidia="", iluvatar=IXSMI, enflame=EFSMI, hygon=HY_SMI,
                             mthreads=MTHREADS_GMI)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    card = {"gpu": "1", "uuid": "GPU-00000000-0000-0000-0000-00000000000f", "vendor": "iluvatar"}
    assert metrics.get("gpu_health_ecc_uncorrected_total", **card) == 0
    info = {(s["vendor"], s["gpu"], s["model"]) for s in metrics.series("gpu_health_gpu_info")}
    assert {("enflame", "1", "Enflame S60"), ("hygon", "1", ""),
            ("mthreads", "1", "MTT S5000")} <= info
    counted = {s["vendor"] for name in ("ecc_corrected_total", "ecc_uncorrected_total")
               for s in metrics.series(f"gpu_health_{name}")}
    assert counted == {"iluvatar"}  # never a 0 for what the listing-only tools cannot say
    for vendor in ("iluvatar", "enflame", "hygon", "mthreads"):
        assert metrics.get("gpu_health_exporter_collect_success", vendor=vendor) == 1
