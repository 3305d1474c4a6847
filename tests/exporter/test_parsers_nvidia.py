"""Pure nvidia-smi parsers: help text, column plan, query CSV (project fixtures + inline rows)."""

from __future__ import annotations

import pytest

from gpu_health.errors import ParseError
from gpu_health.exporter.parsers import nvidia
from gpu_health.exporter.parsers.cells import CellReader, is_declared_unknown
from tests.shared import FIXTURES

HELP_590 = (FIXTURES / "nvidia-smi-help-query-gpu-590.48.01.txt").read_text()
HELP_466 = (FIXTURES / "nvidia-smi-help-query-gpu-466-windows.txt").read_text()
FULL_PLAN = ("index", "name", "uuid", "pci.bus_id", *nvidia.HEALTH_FIELDS)


def test_help_lists_fields_and_aliases_in_the_current_header_style() -> None:
    fields = nvidia.parse_help(HELP_590)
    assert fields.switch == "--query-gpu"
    assert {"name", "gpu_name", "retired_pages.sbe", "clocks_throttle_reasons.active"} <= (
        fields.names
    )
    assert all(fields.supports(f) for f in nvidia.HEALTH_FIELDS)


def test_help_prose_lines_in_quotes_are_not_fields() -> None:
    names = nvidia.parse_help(HELP_590).names | nvidia.parse_help(HELP_466).names
    assert not {n for n in names if ":" in n or n in {"Default", "Prohibited"}}


def test_old_help_header_style_and_no_remap_fields_means_remap_never_queried() -> None:
    fields = nvidia.parse_help(HELP_466)
    assert fields.switch == "--query-gpu="
    columns = nvidia.plan_columns(fields)
    assert nvidia.REMAP_PENDING not in columns and nvidia.REMAP_FAILURE not in columns
    # a 2021 driver already lists retired_pages.pending (Volta's pending page blacklist)
    assert columns == ("index", "name", "uuid", "pci.bus_id", *nvidia.HEALTH_FIELDS[:4],
                       nvidia.PAGES_PENDING)


def test_help_with_a_leading_blank_line_is_accepted() -> None:
    assert nvidia.parse_help("\n" + HELP_590).switch == "--query-gpu"


@pytest.mark.parametrize(
    "text",
    ["", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
     "\x00\xff garbage \x01", 'List of valid properties to query for the switch "--query-gpu":\n'],
)
def test_help_garbage_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        nvidia.parse_help(text)


def test_plan_puts_identity_first_and_skips_rejected_fields() -> None:
    fields = nvidia.parse_help(HELP_590)
    details = [f for f in nvidia.REMAP_DETAIL_FIELDS if fields.supports(f)]
    assert details  # the remapped-row counts and/or the bank histogram, probed like the rest
    status = [f for f in (nvidia.RECOVERY_ACTION, nvidia.PAGES_PENDING) if fields.supports(f)]
    assert status == [nvidia.PAGES_PENDING]  # 590 lists no gpu_recovery_action; 580 does
    assert nvidia.plan_columns(fields) == (*FULL_PLAN, *details, *status)
    columns = nvidia.plan_columns(fields, frozenset({nvidia.REMAP_FAILURE, "index"}))
    assert nvidia.REMAP_FAILURE not in columns and columns[0] == "index"


def test_plan_without_index_in_help_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="index"):
        nvidia.plan_columns(nvidia.HelpFields(frozenset({"name", "uuid"}), "--query-gpu"))


def row(index: str = "0", uuid: str = "GPU-a", name: str = "NVIDIA H100 80GB HBM3",
        bus: str = "00000000:00:09.0", cells: tuple[str, ...] = ("0", "0", "[N/A]", "[N/A]",
                                                                  "No", "No")) -> str:
    return ", ".join((index, name, uuid, bus, *cells))


def test_query_maps_columns_by_position_and_flags_to_one_and_zero() -> None:
    text = row() + "\n" + row("3", "GPU-b", cells=("12", "1", "2", "5", "Yes", "No")) + "\n"
    out = nvidia.parse_query(text, FULL_PLAN)
    first, second = out.readings
    assert (first.gpu, first.uuid, first.model, first.pci_bus_id) == (
        0, "GPU-a", "NVIDIA H100 80GB HBM3", "00000000:00:09.0")
    assert dict(first.counters) == {
        "ecc_corrected_total": 0, "ecc_uncorrected_total": 0, "retired_pages": None,
        "remapped_rows_pending": 0, "remapped_rows_failure": 0}
    assert second.gpu == 3  # the index the tool printed, not the row position
    assert dict(second.counters) == {
        "ecc_corrected_total": 12, "ecc_uncorrected_total": 1, "retired_pages": 7,
        "remapped_rows_pending": 1, "remapped_rows_failure": 0}
    assert out.anomalies == ()


@pytest.mark.parametrize(
    "cell",
    ["[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]",
     "[Function Not Found]", "[Requested functionality has been deprecated]", ""],
)
def test_every_declared_unknown_spelling_is_unknown_not_zero(cell: str) -> None:
    text = row(cells=(cell, cell, cell, cell, cell, cell))
    (reading,) = nvidia.parse_query(text, FULL_PLAN).readings
    assert set(reading.counters.values()) == {None}
    assert is_declared_unknown(cell)


def test_retired_pages_unknown_when_only_one_part_is_known() -> None:
    (reading,) = nvidia.parse_query(row(cells=("0", "0", "4", "[N/A]", "No", "No")),
                                    FULL_PLAN).readings
    assert reading.counters["retired_pages"] is None


def test_negative_and_non_integer_values_are_unknown_and_reported_no_real_capture() -> None:
    text = row(cells=("-1", "3.5", "-2", "0", "Maybe", "1"))
    out = nvidia.parse_query(text, FULL_PLAN)
    assert set(out.readings[0].counters.values()) == {None}
    assert len(out.anomalies) == 5  # -1, 3.5, -2 (retired), Maybe, 1 (a flag must be Yes/No)
    assert any("'-1'" in a and "corrected.aggregate" in a for a in out.anomalies)


def test_missing_uuid_and_name_become_empty_labels() -> None:
    (reading,) = nvidia.parse_query(row(uuid="[N/A]", name="[N/A]"), FULL_PLAN).readings
    assert reading.uuid is None and reading.model == ""


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (row()[:40], "cells"),  # truncated mid-row
        (row() + ", 7", "cells"),  # extra column
        (row(index="[N/A]"), "index"),
        (row(index="-1"), "index"),
        (row() + "\n" + row(uuid="GPU-b"), "twice"),  # two rows claim gpu 0
        ("\x00\x01\x02,\xff\n" * 3, "cells"),
    ],
    ids=["truncated", "extra-columns", "unknown-index", "negative-index", "duplicate-index",
         "binary-garbage"],
)
def test_untrustworthy_output_is_rejected_whole_no_real_capture(text: str, match: str) -> None:
    with pytest.raises(ParseError, match=match):
        nvidia.parse_query(text, FULL_PLAN)


def test_empty_output_and_blank_lines() -> None:
    assert nvidia.parse_query("", FULL_PLAN).readings == ()
    assert len(nvidia.parse_query("\n" + row() + "\n\n", FULL_PLAN).readings) == 1


def test_rejected_field_is_read_from_the_tools_message() -> None:
    assert nvidia.rejected_field('Field "device_minor" is not a valid field to query.\n\n') == (
        "device_minor")
    assert nvidia.rejected_field("Failed to initialize NVML: Driver/library version mismatch") is (
        None)


def test_cell_reader_counts_only_plain_non_negative_integers() -> None:
    reader = CellReader()
    assert reader.count(f" {2**53} ", "x") == 2**53
    assert [reader.count(c, "x") for c in ("+1", "1e3", "٣", "0x10")] == [None] * 4
    assert len(reader.anomalies) == 4


@pytest.mark.parametrize("cell", [str(2**53 + 1), "18446744073709551615", "1" + "0" * 26])
def test_a_count_above_2_53_is_unknown_not_a_rounded_float(cell: str) -> None:
    # The exposition format is float64: 10^26 would be exported as 1e+26, as if exact.
    out = nvidia.parse_query(row(cells=(cell, cell, "0", "0", "No", "No")), FULL_PLAN)
    counters = out.readings[0].counters
    assert counters["ecc_uncorrected_total"] is None and counters["ecc_corrected_total"] is None
    assert len(out.anomalies) == 2 and all("2^53" in a for a in out.anomalies)


@pytest.mark.parametrize(("cell", "action", "anomaly"), [
    ("None", "none", False),  # the H200's answer (driver 580): a value, not an unknown
    ("GPU Reset", "gpu_reset", False),
    ("Node Reboot", "node_reboot", False),
    ("Drain P2P", "drain_p2p", False),
    ("Drain and Reset", "drain_and_reset", False),
    ("[N/A]", None, False),
    ("[Unknown Error]", None, False),
    ("Reboot the moon", None, True),
])
def test_recovery_action_spellings(cell: str, action: str | None, anomaly: bool) -> None:
    columns = ["index", "name", nvidia.RECOVERY_ACTION, nvidia.PAGES_PENDING]
    parsed = nvidia.parse_query(f"0, NVIDIA H200, {cell}, Yes\n", columns)
    (card,) = parsed.readings
    assert card.recovery_action == action and card.pages_pending == 1
    assert bool(parsed.anomalies) is anomaly
    if anomaly:
        assert "gpu_recovery_action" in parsed.anomalies[0]
