"""Property-based tests (Hypothesis) of every exporter parser: arbitrary text, and real output
with random damage, never raises past the parser boundary (only ``GpuHealthError``, which the
source turns into an error self-metric), and never yields 0 where the text has no literal zero
(a ``0`` digit, or a ``No`` flag)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_health.errors import GpuHealthError
from gpu_health.exporter.parsers import (
    ascend,
    cambricon,
    enflame,
    hygon,
    iluvatar,
    kunlunxin,
    kunlunxin_xml,
    metax,
    mthreads,
    nvidia,
    nvidia_nvlink,
    nvidia_q,
    smi_xml,
    xid,
)
from gpu_health.exporter.parsers.cells import MAX_EXACT_COUNT, CellReader
from gpu_health.exporter.tool_output import ParsedOutput

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PLAN = ("index", "name", "uuid", "pci.bus_id", *nvidia.HEALTH_FIELDS)
MX_LIST = (FIXTURES / "mx-smi-L-C500-2.2.12.txt").read_text()
MX_ECC = (FIXTURES / "mx-smi-count-ecc-C500-2.2.12.txt").read_text()

# parser name -> (parse(text), a real output of its tool to damage)
PARSERS: dict[str, tuple[Callable[[str], Any], str]] = {
    "nvidia.parse_query": (lambda t: nvidia.parse_query(t, PLAN),
                           "nvidia-smi-query-gpu-h100-590.48.01.csv"),
    "nvidia.parse_help": (nvidia.parse_help, "nvidia-smi-help-query-gpu-590.48.01.txt"),
    "nvidia_q.parse_replays": (lambda t: nvidia_q.parse_replays(t, CellReader()),
                               "nvidia-smi-q-h100-590.48.01.txt"),
    "nvidia_nvlink.parse_nvlink_errors": (
        lambda t: nvidia_nvlink.parse_nvlink_errors(t, CellReader()),
        "nvidia-smi-nvlink-e-a100-535.161.08.txt"),
    "cambricon.parse_table": (cambricon.parse_table, "cnmon-table-MLU370-X8-5.10.22.txt"),
    "enflame.parse_query": (enflame.parse_query, "efsmi-q-S60-1.5.txt"),
    "hygon.parse_table": (hygon.parse_table, "hy-smi-table-K100AI-dtk24.04.1.txt"),
    "iluvatar.parse_xml": (iluvatar.parse_xml, "ixsmi-q-x-MR-V100-4.2.0.xml"),
    "kunlunxin.parse_table": (kunlunxin.parse_table, "xpu-smi-table-P800-5.19.0.txt"),
    "kunlunxin_xml.parse_xml": (kunlunxin_xml.parse_xml, "xpu-smi-q-x-P800-5.19.0.xml"),
    "metax.parse(list)": (lambda t: metax.parse(t, MX_ECC), "mx-smi-L-C500-2.2.12.txt"),
    "metax.parse(ecc)": (lambda t: metax.parse(MX_LIST, t), "mx-smi-count-ecc-C500-2.2.12.txt"),
    "mthreads.parse_table": (mthreads.parse_table, "mthreads-gmi-table-S5000-2.4.1.txt"),
    "ascend.parse_table": (ascend.parse_table, "npu-smi-info-910B2-24.1.0.3.txt"),
    "ascend.parse_ecc": (lambda t: ascend.parse_ecc(t, 0, CellReader()),
                         "npu-smi-info-t-ecc-910A-23.0.5.txt"),
    "xid.parse_line": (xid.parse_line, "dmesg-xid-variants.log"),
    "xid.parse_event": (xid.parse_event, "dmesg-xid-variants.log"),
    "smi_xml.parse_document": (lambda t: smi_xml.parse_document(t, "nvidia_smi_log", "t"),
                               "ixsmi-q-x-MR-V100-4.2.0.xml"),
}
QUICK = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def counter_values(result: Any) -> Iterator[int | None]:
    """Every counter value a parser result carries."""
    items = result if isinstance(result, tuple) else (result,)
    for item in items:
        if isinstance(item, ParsedOutput):
            for reading in item.readings:
                yield from reading.counters.values()
        elif isinstance(item, ascend.EccBlock):
            yield from item.counters.values()
        elif isinstance(item, nvidia_q.PcieReplays):
            yield from (item.replays, item.rollovers)
        elif isinstance(item, nvidia_nvlink.CardLinks):
            yield from item.counts.values()


# Parsers that take a second, fixed input: its zeros are literal zeros of the whole input.
SECOND_INPUT = {"metax.parse(list)": MX_ECC, "metax.parse(ecc)": MX_LIST}


def check(parse: Callable[[str], Any], text: str, other: str = "") -> None:
    try:
        result = parse(text)
    except GpuHealthError:
        return  # the parser boundary: the source counts it, the next tick tries again
    values = list(counter_values(result))
    for value in values:
        assert value is None or (isinstance(value, int) and 0 <= value <= MAX_EXACT_COUNT)
    whole = text + other
    if "0" not in whole and not re.search(r"\bNo\b", whole):
        assert 0 not in values, "a 0 without a literal zero in the text"


def damaged(original: str) -> st.SearchStrategy[str]:
    """The real output with a slice replaced, cut off, or with digits swapped for text."""
    def damage(start: int, length: int, junk: str) -> str:
        start %= max(len(original), 1)
        return original[:start] + junk + original[start + length:]

    return st.one_of(
        st.builds(damage, st.integers(0, 10**6), st.integers(0, 200), st.text(max_size=40)),
        st.integers(0, len(original)).map(lambda n: original[:n]),
        st.just(re.sub(r"[0-9]", "x", original)),
        st.just(re.sub(r"\b0\b", "-1", original)),
    )


@pytest.mark.parametrize("name", list(PARSERS))
@QUICK
@given(text=st.text(max_size=400))
def test_arbitrary_text_stays_behind_the_parser_boundary(name: str, text: str) -> None:
    check(PARSERS[name][0], text, SECOND_INPUT.get(name, ""))


@pytest.mark.parametrize("name", list(PARSERS))
@QUICK
@given(data=st.data())
def test_damaged_real_output_never_invents_a_zero(name: str, data: st.DataObject) -> None:
    parse, fixture = PARSERS[name]
    text = data.draw(damaged((FIXTURES / fixture).read_text(encoding="utf-8")))
    check(parse, text, SECOND_INPUT.get(name, ""))


@QUICK
@given(cells=st.lists(st.one_of(st.text(max_size=12), st.integers(-5, 2**70).map(str),
                                st.sampled_from(["0", "00", "No", "Yes", "[N/A]", " 0 "])),
                      min_size=6, max_size=6))
def test_an_nvidia_counter_is_0_only_from_a_literal_zero(cells: list[str]) -> None:
    clean = [c.replace(",", " ").replace("\n", " ") for c in cells]
    text = ", ".join(("0", "H100", "GPU-a", "00000000:00:09.0", *clean))
    try:
        out = nvidia.parse_query(text, PLAN)
    except GpuHealthError:
        return
    counters = out.readings[0].counters
    literal = [re.fullmatch(r"0+", c.strip()) is not None for c in clean]
    flags_no = [c.strip() == "No" for c in clean]
    # column order of nvidia.HEALTH_FIELDS: corrected, uncorrected, sbe, dbe, pending, failure
    assert (counters["ecc_corrected_total"] == 0) == literal[0]
    assert (counters["ecc_uncorrected_total"] == 0) == literal[1]
    assert (counters["retired_pages"] == 0) == (literal[2] and literal[3])
    assert (counters["remapped_rows_pending"] == 0) == flags_no[4]
    assert (counters["remapped_rows_failure"] == 0) == flags_no[5]
