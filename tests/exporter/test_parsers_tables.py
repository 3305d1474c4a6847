"""Pure table parsers: Kunlunxin xpu-smi / xpu_smi and Cambricon cnmon (project fixtures).

There is no cnmon capture in ../shared; the cnmon fixtures are rebuilt from published cnmon
output (tests/fixtures/README.md), so those tests say ``no_real_capture`` in their names.
"""

from __future__ import annotations

import pytest

from gpu_health.errors import ParseError
from gpu_health.exporter.parsers import cambricon, kunlunxin
from tests.shared import FIXTURES


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_xpu_smi_gen3_volatile_uncorr_ecc_feeds_uncorrected_only() -> None:
    out = kunlunxin.parse_table(fixture("xpu-smi-table-P800-5.19.0.txt"))
    assert [(r.gpu, r.model, r.pci_bus_id, r.uuid) for r in out.readings] == [
        (0, "P800 OAM", "00000000:03:00.0", None),
        (1, "P800 OAM", "00000000:05:00.0", None),
    ]
    for reading in out.readings:
        assert reading.vendor == "kunlunxin"
        assert dict(reading.counters) == {
            "ecc_uncorrected_total": 0, "ecc_corrected_total": None, "retired_pages": None,
            "remapped_rows_pending": None, "remapped_rows_failure": None}


def test_xpu_smi_gen3_na_and_garbage_in_the_ecc_column_no_real_capture() -> None:
    text = fixture("xpu-smi-table-P800-5.19.0.txt")
    text = text.replace("|                    0 |", "|                  N/A |", 1)
    text = text.replace("|                    0 |", "|                   -4 |", 1)
    out = kunlunxin.parse_table(text)
    assert [r.counters["ecc_uncorrected_total"] for r in out.readings] == [None, None]
    assert len(out.anomalies) == 1 and "'-4'" in out.anomalies[0]


def test_xpu_smi_gen3_without_the_ecc_column_is_unknown_no_real_capture() -> None:
    text = fixture("xpu-smi-table-P800-5.19.0.txt")
    text = text.replace("Volatile Uncorr. ECC", "    Something else  ")
    out = kunlunxin.parse_table(text)
    assert len(out.readings) == 2
    assert all(r.counters["ecc_uncorrected_total"] is None for r in out.readings)


def test_xpu_smi_gen2_has_no_ecc_column_cards_listed_all_unknown() -> None:
    out = kunlunxin.parse_table(fixture("xpu_smi-table-K200-4.33.txt"))
    assert [(r.gpu, r.model, r.pci_bus_id) for r in out.readings] == [
        (0, "K200", "0000:43:00.0"), (1, "K200", "0000:43:00.0")]
    assert all(set(r.counters.values()) == {None} for r in out.readings)


@pytest.mark.parametrize("text", ["", "xpu-smi: command failed\n", "\x00\x01\x02" * 100])
def test_xpu_smi_without_a_table_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        kunlunxin.parse_table(text)


def test_xpu_smi_duplicate_index_is_a_parse_error_no_real_capture() -> None:
    text = fixture("xpu-smi-table-P800-5.19.0.txt").replace("|   1  P800", "|   0  P800")
    with pytest.raises(ParseError, match="twice"):
        kunlunxin.parse_table(text)


@pytest.mark.parametrize(
    ("name", "model", "buses", "ecc"),
    [
        ("cnmon-table-MLU370-X8-5.10.22.txt", "MLU370-X8", ["0000:13:00.0", "0000:16:00.0"], 0),
        ("cnmon-table-MLU370-X8-5.10.13.txt", "MLU370-X8", ["0000:39:00.0", "0000:3D:00.0"], None),
        ("cnmon-table-MLU370-X4-5.10.10.txt", "MLU370-X4", ["0000:1B:00.0", "0000:36:00.0"], None),
        ("cnmon-table-MLU370-X4-4.20.11.txt", "MLU370-X4", [None, None], None),
    ],
    ids=["5.10.22-zero", "5.10.13-NA", "5.10.10-NA-misaligned", "4.20.11-no-bus-id"],
)
def test_cnmon_ecc_error_column_no_real_capture(
    name: str, model: str, buses: list[str | None], ecc: int | None
) -> None:
    out = cambricon.parse_table(fixture(name))
    assert [(r.gpu, r.model, r.pci_bus_id, r.uuid) for r in out.readings] == [
        (i, model, bus, None) for i, bus in enumerate(buses)]
    for reading in out.readings:
        assert reading.vendor == "cambricon"
        assert reading.counters[cambricon.ECC_ERROR_KEY] == ecc
        assert sum(v is not None for v in reading.counters.values()) == (ecc is not None)
    assert out.anomalies == ()


def test_cnmon_process_table_rows_are_not_cards_no_real_capture() -> None:
    text = fixture("cnmon-table-MLU370-X8-5.10.22.txt").replace(
        "|  No running processes found                                                  |",
        "|  0     0   4242    python train.py                              1024 MiB     |")
    assert [r.gpu for r in cambricon.parse_table(text).readings] == [0, 1]


def test_cnmon_virtual_function_rows_are_skipped_no_real_capture() -> None:
    text = fixture("cnmon-table-MLU370-X8-5.10.22.txt").replace(
        "| 1     /   MLU370-X8", "| 1     2   MLU370-X8")
    assert [r.gpu for r in cambricon.parse_table(text).readings] == [0]


def test_cnmon_cell_that_does_not_fit_the_header_is_unknown_no_real_capture() -> None:
    text = fixture("cnmon-table-MLU370-X8-5.10.22.txt").replace(
        "| 0%                  0 |", "| 0%                    |", 1)
    out = cambricon.parse_table(text)
    assert out.readings[0].counters[cambricon.ECC_ERROR_KEY] is None
    assert out.readings[1].counters[cambricon.ECC_ERROR_KEY] == 0
    assert len(out.anomalies) == 1


@pytest.mark.parametrize("text", ["", "cnmon: no MLU found\n", "\xff\xfe" * 50])
def test_cnmon_without_a_table_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        cambricon.parse_table(text)
