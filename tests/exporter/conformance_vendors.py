"""Conformance checks for ../shared/fixtures/vendors (read in place, never copied).

``CHECKS`` maps each capture the exporter reads to a check of the values it must produce,
mostly through the vendor's source and fake tool; a check with a reason proves why a capture
is deliberately NOT read (invalid JSON, a mode instead of a count). ``NOT_APPLICABLE`` lists the
rest with the reason. test_conformance.py fails on any file in neither.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_health.exporter.parsers import ascend, enflame
from gpu_health.exporter.parsers.cells import CellReader
from gpu_health.exporter.sources.ascend import AscendSource
from gpu_health.exporter.sources.enflame import EnflameSource
from gpu_health.exporter.sources.hygon import HygonSource
from gpu_health.exporter.sources.iluvatar import IluvatarSource
from gpu_health.exporter.sources.kunlunxin import KunlunxinSource
from gpu_health.exporter.sources.metax import MetaxSource
from gpu_health.exporter.sources.mthreads import MooreThreadsSource
from tests.shared import FIXTURES, SHARED

from .conformance_support import Case, Check, collect, identities, known
from .support import (
    EFSMI,
    HY_SMI,
    IXSMI,
    MTHREADS_GMI,
    MX_SMI,
    NPU_SMI,
    XPU_SMI,
    FakeClock,
)

VENDORS_DIR = SHARED / "fixtures" / "vendors"
ZERO3 = {"ecc_corrected_total": 0, "ecc_uncorrected_total": 0, "retired_pages": 0}
ZERO2 = {"ecc_corrected_total": 0, "ecc_uncorrected_total": 0}


def check_kunlun_xml(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    out = collect(KunlunxinSource, XPU_SMI, env, clock, FAKE_XPU_XML=str(case.paths[0]))
    assert identities(out) == [
        (0, "GPU-a0ac042a-5a14-5481-bf7e-dd8e523792cd", "P800 OAM", "00000000:03:00.0"),
        (7, "GPU-5e4fa5ff-6c8b-5873-ab72-c3e5a176da72", "P800 OAM", "00000000:A5:00.0")]
    assert [known(r) for r in out.readings] == [ZERO2, ZERO2] and out.anomalies == ()


def _kunlun_table(path: Path, env: dict[str, str], clock: FakeClock) -> list[dict[str, int]]:
    out = collect(KunlunxinSource, XPU_SMI, env, clock, FAKE_XPU_TABLE=str(path),
                  FAKE_XPU_XML_MODE="exit:2")  # no XML mode: the table fallback
    assert all(r.uuid is None for r in out.readings)
    return [known(r) for r in out.readings]


def check_kunlun_gen3(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    assert _kunlun_table(case.paths[0], env, clock) == [{"ecc_uncorrected_total": 0}] * 3


def check_kunlun_gen2(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    assert _kunlun_table(case.paths[0], env, clock) == [{}] * 4


ASCEND_TABLES: dict[str, list[tuple[int, str, str]]] = {
    "ascend-npu-smi-info-table-22.0.3-910A-NA-power.txt": [(4, "910A", "0000:81:00.0")],
    "ascend-npu-smi-info-table-24.1.RC2-8card-warning-excerpt.txt": [
        (i, "xxx", f"0000:{bus}:00.0") for i, bus in enumerate(
            ["C1", "81", "41", "01", "C2", "82", "42", "02"])],
    "ascend-npu-smi-info-table-910B2-excerpt.txt": [
        (0, "910B2", "0000:C1:00.0"), (1, "910B2", "0000:C2:00.0"), (2, "910B2", "0000:81:00.0")],
    "ascend-npu-smi-info-table-950-doc.txt": [(0, "xxx", "0000:91:00.0")],
    "ascend-npu-smi-info-table-A3-26.0.rc2-excerpt.txt": [
        (0, "Ascend910", "0000:9D:00.0"), (1, "Ascend910", "0000:9F:00.0")],
    "ascend-npu-smi-info-table-A3-excerpt.txt": [
        (0, "Ascend910", "0000:9D:00.0"), (1, "Ascend910", "0000:9F:00.0"),
        (2, "Ascend910", "0000:99:00.0")],
}


def check_ascend_table(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    out = collect(AscendSource, NPU_SMI, env, clock, FAKE_NPU_TABLE=str(case.paths[0]))
    expected = ASCEND_TABLES[case.paths[0].name]
    assert [(r.gpu, r.model, r.pci_bus_id) for r in out.readings] == expected
    assert all(r.uuid is None for r in out.readings)
    # The project ECC capture (910A) labels its block "Chip ID : 0": on A3 (two dies per NPU,
    # labelled by Phy-ID) only chip 0 of each NPU gets it; the other die stays unknown.
    a3 = "A3" in case.paths[0].name
    assert [known(r) for r in out.readings] == [
        {} if a3 and gpu % 2 else ZERO3 for gpu, _, _ in expected]
    assert out.failures == ()


def check_ascend_ecc(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    table = FIXTURES / "npu-smi-info-910B2-24.1.0.3.txt"
    if "950" in case.paths[0].name:  # its own generation's table (one chip, no Chip ID line)
        table = VENDORS_DIR / "ascend-npu-smi-info-table-950-doc.txt"
    out = collect(AscendSource, NPU_SMI, env, clock, FAKE_NPU_TABLE=str(table),
                  FAKE_NPU_ECC=str(case.paths[0]))
    assert [known(r) for r in out.readings] == [ZERO3] * len(out.readings)
    assert out.readings and out.failures == () and out.anomalies == ()


def check_ascend_collect_doc(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    sections: dict[str, str] = {}
    command = ""
    for line in case.paths[0].read_text().splitlines(keepends=True):
        if line.startswith("/usr/local/bin/npu-smi"):
            command = line.split("npu-smi", 1)[1].strip()
        else:
            sections[command] = sections.get(command, "") + line
    chips = ascend.parse_table(sections["info"])  # the doc elides cards 1-6 with "..."
    assert [(c.npu, c.chip, c.gpu, c.bus) for c in chips] == [
        (0, 0, 0, "0000:61:00.0"), (7, 0, 7, "0000:3D:00.0")]
    (block,) = ascend.parse_ecc(sections["info -i 0 -t ecc"], 0, CellReader())
    assert block.chip == 0 and known(block.counters) == ZERO3


def check_ascend_invalid_card(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    out = collect(AscendSource, NPU_SMI, env, clock, FAKE_NPU_ECC_1=str(case.paths[0]))
    assert [known(r) for r in out.readings] == [ZERO3, {}]  # card 1 unknown, card 0 still read
    assert [f.reason for f in out.failures] == ["parse"]
    assert "Invalid card id" in out.failures[0].message


def check_metax(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    out = collect(MetaxSource, MX_SMI, env, clock,
                  FAKE_MX_LIST=str(VENDORS_DIR / "metax-mx-smi-2.2.12-L.txt"),
                  FAKE_MX_ECC=str(VENDORS_DIR / "metax-mx-smi-2.2.12-count-ecc.txt"))
    buses = ["37", "0e", "0f", "10", "12", "35", "36", "38"]
    assert identities(out) == [
        (i, "GPU-df110ed1-56d2-e35b-d97b-e23bca667d75" if i == 0 else None, "MXC500",
         f"0000:{bus}:00.0") for i, bus in enumerate(buses)]
    # GPUs 1-7 are "Not Available" to this container: listed, every counter unknown.
    assert [known(r) for r in out.readings] == [ZERO3] + [{}] * 7 and out.anomalies == ()


def check_metax_help(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    text = case.paths[0].read_text()
    assert "--count-ecc" in text and "-L,  --list" in text  # the two modes the exporter runs


def check_metax_json(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    body = case.paths[0].read_text().split("\n", 1)[1]  # after "mx-smi  version: ..."
    card = json.loads(body)["0000:37:00.0"]
    assert card["ras_count"] == {"uncorrected_error": {}, "corrected_error": {}}


def check_iluvatar(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    out = collect(IluvatarSource, IXSMI, env, clock, FAKE_IXSMI_XML=str(case.paths[0]))
    assert identities(out) == [
        (0, "GPU-1ac807aa-cbcd-5579-8591-d59d436d6eca", "Iluvatar MR-V100", "00000000:0C:00.0"),
        (1, "GPU-be5622c9-df8e-56fb-8586-86e94d57c938", "Iluvatar MR-V100", "00000000:0F:00.0")]
    assert [known(r) for r in out.readings] == [ZERO2, ZERO2] and out.anomalies == ()


def check_enflame_query(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    out = collect(EnflameSource, EFSMI, env, clock, FAKE_EFSMI_QUERY=str(case.paths[0]))
    assert identities(out) == [(0, "TPUH90200803", "Enflame S60", "0000:0d:00.0"),
                               (9, "TPUH71221004", "Enflame S60", "0000:2e:00.0")]
    assert [known(r) for r in out.readings] == [{}, {}]  # "DRAM HBM Error : 0" is not proven ECC


def check_enflame_query_d(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    out = enflame.parse_query(case.paths[0].read_text())
    assert identities(out) == [(0, None, "", "0000:0c:00.0"), (1, None, "", "0000:0f:00.0")]


def check_hygon_table(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    out = collect(HygonSource, HY_SMI, env, clock, FAKE_HYSMI_TABLE=str(case.paths[0]))
    count = 2 if "BW1000" in case.paths[0].name else 8 if "rocm-smi" in case.paths[0].name else 4
    assert identities(out) == [(i, None, "", None) for i in range(count)]
    assert all(known(r) == {} for r in out.readings)


def check_hygon_json_invalid(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(case.paths[0].read_text())


def check_rocm_json(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    card = json.loads(case.paths[0].read_text())["card0"]
    assert not [key for key in card if "ecc" in key.lower() or "ras" in key.lower()]


def check_mthreads(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    out = collect(MooreThreadsSource, MTHREADS_GMI, env, clock,
                  FAKE_MTGMI_TABLE=str(case.paths[0]))
    if "S5000" in case.paths[0].name:
        buses = ["18", "3a", "4b", "5c", "9a", "ba", "ca", "da"]
        assert identities(out) == [
            (i, None, "MTT S5000", f"00000000:{b}:00.0") for i, b in enumerate(buses)]
    else:
        assert identities(out) == [(0, None, "MTT S80", "00000000:01:00.0")]
    assert all(known(r) == {} for r in out.readings)  # "ECC Mode" is a mode, not a count


_ASCEND_ECC = "ascend-npu-smi-info-ecc-{}-doc.txt"
CHECKS: dict[str, tuple[Check, str]] = {
    "kunlun-xpu-smi-gen3-P800-q-x-excerpt.txt": (check_kunlun_xml, ""),
    "kunlun-xpu-smi-gen3-P800-table-excerpt.txt": (check_kunlun_gen3, ""),
    "kunlun-xpu_smi-gen2-K200-table.txt": (check_kunlun_gen2, ""),
    **dict.fromkeys(ASCEND_TABLES, (check_ascend_table, "")),
    _ASCEND_ECC.format("910A"): (check_ascend_ecc, ""),
    _ASCEND_ECC.format("950"): (check_ascend_ecc, ""),
    "ascend-npu-smi-910A-collect-doc.txt": (check_ascend_collect_doc, ""),
    "ascend-npu-smi-invalid-card-id.txt": (check_ascend_invalid_card, ""),
    "metax-mx-smi-2.2.12-L.txt": (check_metax, ""),
    "metax-mx-smi-2.2.12-count-ecc.txt": (check_metax, ""),
    "metax-mx-smi-2.2.12-help.txt": (check_metax_help, ""),
    "metax-mx-smi-2.2.12-json.txt": (
        check_metax_json, "-j ras_count holds empty objects, no DRAM counts; --count-ecc is read"),
    "iluvatar-ixsmi-q-x-MR-V100-4.2.0.txt": (check_iluvatar, ""),
    "enflame-efsmi-q-S60-excerpt.txt": (check_enflame_query, ""),
    **{f"enflame-efsmi-q-d-TEMP-MEMORY-USAGE-PCIE-{v}.txt": (check_enflame_query_d, "")
       for v in ("1.5", "1.7", "old")},
    **{f"hygon-{name}.txt": (check_hygon_table, "") for name in (
        "hy-smi-default-DCU-K100AI-dtk24.04.1", "hy-smi-default-DCU-mode-NA-dtk24.04",
        "hy-smi-default-HCU-BW1000-dtk26.04", "rocm-smi-dtk23.10-default")},
    "hygon-hy-smi-json-BW-malformed.txt": (
        check_hygon_json_invalid, "hy-smi --json is invalid JSON (missing commas); table read"),
    "hygon-rocm-smi-json-24.04.3.txt": (
        check_rocm_json, "rocm-smi --json has no ECC or RAS field; the table is read"),
    "mthreads-mthreads-gmi-default-S5000-2.4.1.txt": (check_mthreads, ""),
    "mthreads-mthreads-gmi-default-S80-2.0.0-ecc-NA.txt": (check_mthreads, ""),
}
NOT_APPLICABLE: dict[str, str] = {
    r"SOURCES\.md": "provenance notes, not tool output",
    r"kunlun-.*-m\.txt": "xpu-smi -m machine format, field meanings undocumented; XML/table read",
    r"ascend-npu-smi-info-health-.*\.txt": "health status/alarm codes are not one of the five "
    "counters",
    r"ascend-npu-smi-info-ecc-enable-.*\.txt": "ECC enable state, not a count",
    r"ascend-npu-smi-info-help-.*\.txt": "npu-smi info -h usage text",
    r"ascend-npu-smi-info-m-.*\.txt": "npu-smi info -m chip mapping; the info table is read",
    r"metax-mx-smi-.*-default.*\.txt": "default table has no ECC column; -L and --count-ecc read",
    r"metax-mx-smi-.*-show-ecc-state\.txt": "ECC state (Enable), a mode, not a count",
    r"metax-mx-smi-.*-show-temperature-.*\.txt": "temperature and memory only, no ECC",
    r"iluvatar-ixsmi-default-.*\.txt": "default table has no ECC column; ixsmi -q -x is read",
    r"enflame-efsmi-default-.*\.txt": "default table: the ECC column is the mode (Enable/Disable)"
    ", not a count; efsmi -q is read",
    r"enflame-efsmi-dmon-.*\.txt": "dmon columns are power/temperature/usage, no ECC",
}
