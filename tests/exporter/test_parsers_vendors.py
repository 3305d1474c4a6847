"""Pure parsers of the vendors beyond NVIDIA, on the project's own fixtures (tests/fixtures)
and on variants of them built inline. Variants no real capture shows (non-zero counts, odd
cells) say ``no_real_capture`` in their names; every capture in ../shared is checked in
test_conformance.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpu_health.errors import ParseError
from gpu_health.exporter.parsers import (
    ascend,
    enflame,
    hygon,
    iluvatar,
    kunlunxin,
    kunlunxin_xml,
    metax,
    mthreads,
)
from gpu_health.exporter.parsers.cells import CellReader
from tests.shared import FIXTURES

from .conformance_support import identities, known

ZERO2 = {"ecc_corrected_total": 0, "ecc_uncorrected_total": 0}
ZERO3 = {**ZERO2, "retired_pages": 0}


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- Kunlunxin xpu-smi -q -x -------------------------------------------------------------

XPU_XML = "xpu-smi-q-x-P800-5.19.0.xml"


def test_xpu_smi_xml_gives_both_aggregate_counters_and_the_uuid() -> None:
    out = kunlunxin_xml.parse_xml(fixture(XPU_XML))
    assert identities(out) == [
        (0, "GPU-11111111-2222-3333-4444-000000000000", "P800 OAM", "00000000:03:00.0"),
        (1, "GPU-11111111-2222-3333-4444-000000000001", "P800 OAM", "00000000:05:00.0")]
    assert [known(r) for r in out.readings] == [ZERO2, ZERO2]
    assert out.anomalies == ()  # "Invalid Argument" and "N/A" elsewhere are not counters


def _aggregate(text: str, correctable: str, uncorrectable: str) -> str:
    block = ("<aggregate>\n                                <dram_correctable>0</dram_correctable>"
             "\n                                <dram_uncorrectable>0</dram_uncorrectable>")
    assert block in text
    return text.replace(block, block.replace(">0</dram_correctable", f">{correctable}</dram_"
                                             "correctable").replace(
        ">0</dram_uncorrectable", f">{uncorrectable}</dram_uncorrectable"), 1)


def test_xpu_smi_xml_reads_the_aggregate_block_not_the_volatile_one_no_real_capture() -> None:
    out = kunlunxin_xml.parse_xml(_aggregate(fixture(XPU_XML), "17", "2"))
    assert known(out.readings[0]) == {"ecc_corrected_total": 17, "ecc_uncorrected_total": 2}


@pytest.mark.parametrize(("cell", "anomalies"), [("N/A", 0), ("Invalid Argument", 0), ("-3", 1)])
def test_xpu_smi_xml_unknown_values_no_real_capture(cell: str, anomalies: int) -> None:
    out = kunlunxin_xml.parse_xml(_aggregate(fixture(XPU_XML), cell, "0"))
    assert known(out.readings[0]) == {"ecc_uncorrected_total": 0}  # never 0 for the unknown one
    assert len(out.anomalies) == anomalies


def test_xpu_smi_xml_without_aggregate_falls_back_to_volatile_no_real_capture() -> None:
    text = fixture(XPU_XML)
    start, end = text.index("<aggregate>"), text.index("</aggregate>") + len("</aggregate>")
    out = kunlunxin_xml.parse_xml(text[:start] + text[end:])
    assert known(out.readings[0]) == ZERO2


def test_xpu_smi_xml_without_uuid_or_ecc_is_unknown_no_real_capture() -> None:
    text = fixture(XPU_XML).replace(
        "<uuid>GPU-11111111-2222-3333-4444-000000000000</uuid>", "<uuid>N/A</uuid>")
    start, end = text.index("<ecc_errors>"), text.index("</ecc_errors>") + len("</ecc_errors>")
    out = kunlunxin_xml.parse_xml(text[:start] + text[end:])
    assert (out.readings[0].uuid, known(out.readings[0])) == (None, {})


@pytest.mark.parametrize("text", [
    "", "<?xml version='1.0'?><xpu_smi_log><xpu>", "<nvidia_smi_log></nvidia_smi_log>",
    "<xpu_smi_log><xpu><minor_number>x</minor_number></xpu></xpu_smi_log>"])
def test_xpu_smi_xml_that_is_not_a_device_list_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        kunlunxin_xml.parse_xml(text)


@pytest.mark.parametrize(("text", "intel"), [
    (fixture("intel-xpu-smi-help-1.2.txt"), True),
    (fixture("intel-xpu-smi-discovery-1.2.txt"), True),
    ('{\n    "device_list": [\n        {"device_id": 0, "device_name": "Intel(R) Graphics"}]}',
     True),
    ("Error: XPUM Service Status Error. \n", True),
    (fixture("xpu-smi-table-P800-5.19.0.txt"), False),
    (fixture("xpu_smi-table-K200-4.33.txt"), False),
    (fixture(XPU_XML), False),
], ids=["help", "discovery-table", "discovery-json", "service-error", "kunlun-gen3-table",
        "kunlun-gen2-table", "kunlun-xml"])
def test_intel_xpu_smi_output_is_recognised(text: str, intel: bool) -> None:
    assert kunlunxin_xml.is_intel_output(text) is intel
    if intel:  # and the Kunlunxin readers never take it for theirs
        with pytest.raises(ParseError):
            kunlunxin.parse_table(text)


# --- Huawei Ascend npu-smi ---------------------------------------------------------------

def test_npu_smi_table_single_chip_cards_are_labelled_by_npu_id() -> None:
    chips = ascend.parse_table(fixture("npu-smi-info-910B2-24.1.0.3.txt"))
    assert [(c.npu, c.chip, c.gpu, c.name, c.bus) for c in chips] == [
        (0, 0, 0, "910B2", "0000:C1:00.0"), (1, 0, 1, "910B2", "0000:C2:00.0")]


def test_npu_smi_table_a3_dies_are_labelled_by_phy_id() -> None:
    chips = ascend.parse_table(fixture("npu-smi-info-A3-24.1.rc3.txt"))
    assert [(c.npu, c.chip, c.gpu) for c in chips] == [(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3)]


def test_npu_smi_table_two_chips_without_phy_id_is_rejected_no_real_capture() -> None:
    text = fixture("npu-smi-info-A3-24.1.rc3.txt").replace("| Chip  Phy-ID ", "| Chip         ")
    with pytest.raises(ParseError, match="Phy-ID"):
        ascend.parse_table(text)


@pytest.mark.parametrize("text", ["", "npu-smi: command not found\n", "\x00\xff" * 40])
def test_npu_smi_without_a_table_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        ascend.parse_table(text)


def _ecc(text: str, npu: int = 0) -> tuple[tuple[ascend.EccBlock, ...], list[str]]:
    reader = CellReader(ascend.UNKNOWN_WORDS)
    return ascend.parse_ecc(text, npu, reader), reader.anomalies


def test_npu_smi_ecc_910a_block_sums_ddr_and_hbm() -> None:
    (block,), anomalies = _ecc(fixture("npu-smi-info-t-ecc-910A-23.0.5.txt"))
    assert (block.chip, known(block.counters), anomalies) == (0, ZERO3, [])


def test_npu_smi_ecc_counts_map_to_the_three_counters_no_real_capture() -> None:
    text = fixture("npu-smi-info-t-ecc-910A-23.0.5.txt")
    for key, value in (("HBM Single Bit Aggregate Total Err Cnt", 5),
                       ("DDR Single Bit Aggregate Total Err Cnt", 2),
                       ("HBM Single Bit Error Count", 99),  # volatile: aggregate wins
                       ("HBM Double Bit Aggregate Total Err Cnt", 1),
                       ("HBM Single Bit Isolated Pages Count", 3),
                       ("DDR Double Bit Isolated Pages Count", 1)):
        text = text.replace(f"{key:<40} : 0", f"{key:<40} : {value}")
    (block,), _ = _ecc(text)
    assert known(block.counters) == {
        "ecc_corrected_total": 7, "ecc_uncorrected_total": 1, "retired_pages": 4}


def test_npu_smi_ecc_without_aggregate_lines_uses_the_plain_count_no_real_capture() -> None:
    lines = fixture("npu-smi-info-t-ecc-910A-23.0.5.txt").splitlines()
    text = "\n".join(line for line in lines if "Aggregate" not in line).replace(
        "HBM Double Bit Error Count               : 0", "HBM Double Bit Error Count : 6")
    (block,), _ = _ecc(text)
    assert known(block.counters) == {**ZERO3, "ecc_uncorrected_total": 6}


def test_npu_smi_ecc_na_is_unknown_quietly_no_real_capture() -> None:
    key = "DDR Double Bit Aggregate Total Err Cnt"
    text = fixture("npu-smi-info-t-ecc-910A-23.0.5.txt").replace(f"{key}   : 0", f"{key} : NA")
    (block,), anomalies = _ecc(text)
    assert known(block.counters) == {"ecc_corrected_total": 0, "retired_pages": 0}
    assert anomalies == []


def test_npu_smi_ecc_950_block_has_no_chip_id_and_next_isolated_is_not_retired() -> None:
    key = "HBM Single Bit Next-Isolated Pages Count"
    text = fixture("npu-smi-info-t-ecc-950.txt").replace(f"{key} : 0", f"{key} : 9")
    (block,), _ = _ecc(text)
    assert (block.chip, known(block.counters)) == (None, ZERO3)


def test_npu_smi_ecc_unsupported_device_is_unknown_not_zero_no_real_capture() -> None:
    blocks, anomalies = _ecc(fixture("npu-smi-info-t-ecc-unsupported-no-real-capture.txt"))
    assert (blocks, anomalies) == ((), [])
    chips = ascend.parse_table(fixture("npu-smi-info-910B2-24.1.0.3.txt"))
    out = ascend.combine(chips, {0: blocks, 1: blocks})
    assert [known(r) for r in out.readings] == [{}, {}] and out.failures == ()


@pytest.mark.parametrize("text", ["Invalid card id.\nError parameter of -i\n", "garbage\n", ""])
def test_npu_smi_ecc_refusal_or_other_text_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        _ecc(text)


def test_npu_smi_a3_ecc_blocks_go_to_their_own_die_no_real_capture() -> None:
    one = fixture("npu-smi-info-t-ecc-910A-23.0.5.txt").split("\n", 3)[3]  # the chip block
    two = one.replace("HBM Single Bit Aggregate Total Err Cnt   : 0",
                      "HBM Single Bit Aggregate Total Err Cnt : 4").replace(
        "Chip ID                                  : 0", "Chip ID : 1")
    blocks, _ = _ecc(one + two)
    chips = ascend.parse_table(fixture("npu-smi-info-A3-24.1.rc3.txt"))
    out = ascend.combine(chips, {0: blocks, 1: ()})
    assert [r.counters["ecc_corrected_total"] for r in out.readings] == [0, 4, None, None]


# --- MetaX, Iluvatar, Enflame, Hygon, Moore Threads ----------------------------------------

def test_mx_smi_list_and_count_ecc() -> None:
    out = metax.parse(fixture("mx-smi-L-C500-2.2.12.txt"),
                      fixture("mx-smi-count-ecc-C500-2.2.12.txt"))
    assert identities(out) == [
        (0, "GPU-00000000-0000-0000-0000-0000000000c5", "MXC500", "0000:37:00.0"),
        (1, None, "MXC500", "0000:0e:00.0")]  # "Not Available": listed, nothing known
    assert [known(r) for r in out.readings] == [ZERO3, {}] and out.anomalies == ()


def test_mx_smi_counts_and_odd_cells_no_real_capture() -> None:
    ecc = fixture("mx-smi-count-ecc-C500-2.2.12.txt")
    ecc = ecc.replace("DRAM Correctable                          : 0 ", "DRAM Correctable : 12 ")
    ecc = ecc.replace("SRAM Uncorrectable                        : 0 ", "SRAM Uncorrectable : 3 ")
    ecc = ecc.replace("Double Bit ECC                            : 0 ", "Double Bit ECC : N/A ")
    ecc = ecc.replace("DRAM Uncorrectable                        : 0 ", "DRAM Uncorrectable : x ")
    out = metax.parse(fixture("mx-smi-L-C500-2.2.12.txt"), ecc)
    assert known(out.readings[0]) == {"ecc_corrected_total": 12}  # SRAM is not added in
    assert len(out.anomalies) == 1


@pytest.mark.parametrize("ecc", ["", "mx-smi  version: 2.2.12\nError: no device\n"])
def test_mx_smi_count_ecc_without_its_log_banner_is_a_parse_error(ecc: str) -> None:
    with pytest.raises(ParseError):
        metax.parse(fixture("mx-smi-L-C500-2.2.12.txt"), ecc)


def test_ixsmi_xml_single_and_double_bit() -> None:
    out = iluvatar.parse_xml(fixture("ixsmi-q-x-MR-V100-4.2.0.xml"))
    assert identities(out) == [
        (0, "GPU-00000000-0000-0000-0000-00000000000c", "Iluvatar MR-V100", "00000000:0C:00.0"),
        (1, "GPU-00000000-0000-0000-0000-00000000000f", "Iluvatar MR-V100", "00000000:0F:00.0")]
    assert [known(r) for r in out.readings] == [ZERO2, ZERO2]
    text = fixture("ixsmi-q-x-MR-V100-4.2.0.xml").replace(
        "<single_bit>0</single_bit>", "<single_bit>3</single_bit>", 1).replace(
        "<double_bit>0</double_bit>", "<double_bit>N/A</double_bit>", 1)
    assert known(iluvatar.parse_xml(text).readings[0]) == {"ecc_corrected_total": 3}


def test_listing_only_vendors_list_cards_without_any_counter() -> None:
    outs = {
        "enflame": enflame.parse_query(fixture("efsmi-q-S60-1.5.txt")),
        "hygon": hygon.parse_table(fixture("hy-smi-table-K100AI-dtk24.04.1.txt")),
        "mthreads": mthreads.parse_table(fixture("mthreads-gmi-table-S5000-2.4.1.txt")),
    }
    assert identities(outs["enflame"]) == [(0, "TPUH00000000", "Enflame S60", "0000:0d:00.0"),
                                           (1, "TPUH00000001", "Enflame S60", "0000:2e:00.0")]
    assert identities(outs["hygon"]) == [(0, None, "", None), (1, None, "", None)]
    assert identities(outs["mthreads"]) == [(0, None, "MTT S5000", "00000000:18:00.0"),
                                            (1, None, "MTT S5000", "00000000:3a:00.0")]
    for vendor, out in outs.items():
        assert all(r.vendor == vendor and known(r) == {} for r in out.readings)


@pytest.mark.parametrize("parse", [enflame.parse_query, hygon.parse_table, mthreads.parse_table])
@pytest.mark.parametrize("text", ["", "command not found\n", "\x00\x01" * 30])
def test_listing_parsers_reject_other_text(parse: Callable[[str], object], text: str) -> None:
    with pytest.raises(ParseError):
        parse(text)
