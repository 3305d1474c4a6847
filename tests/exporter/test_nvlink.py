"""The NVLink error counters: read from ``nvidia-smi nvlink -e`` after ``-q``, matched to the
CSV's cards by index, exported per link and as the card's total, and never allowed to cost
the other values of a tick.

The fixtures restate two published runs (tests/fixtures/README.md): an H100 (18 links, nine
spaces before ``Link``) and eight A100s with driver 535.161.08 (12 links, a tab and a space).
Non-zero values and the Blackwell counter names come from no published run with values: the
tests that use them build the text inline or use the fake's state file, and say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_health.errors import ParseError
from gpu_health.exporter.parsers import nvidia_nvlink
from gpu_health.exporter.parsers.cells import CellReader
from gpu_health.exporter.tool_output import CardReading, nvlink_total
from tests.shared import FIXTURES

from .conftest import MakeExporter
from .support import FakeClock, invocations, scrape

H100 = (FIXTURES / "nvidia-smi-nvlink-e-h100.txt").read_text()
A100 = (FIXTURES / "nvidia-smi-nvlink-e-a100-535.161.08.txt").read_text()
UUID0 = "GPU-00000000-0000-0000-0000-000000000000"
UUID1 = "GPU-00000000-0000-0000-0000-000000000001"
CARD0 = {"gpu": "0", "uuid": UUID0, "vendor": "nvidia"}
CARD1 = {"gpu": "1", "uuid": UUID1, "vendor": "nvidia"}


def parse(text: str, reader: CellReader | None = None) -> tuple[nvidia_nvlink.CardLinks, ...]:
    return nvidia_nvlink.parse_nvlink_errors(text, reader or CellReader())


@pytest.mark.parametrize("text, cards, links", [(H100, 1, 18), (A100, 2, 12)])
def test_every_link_of_every_card_is_read_from_both_layouts(text: str, cards: int,
                                                             links: int) -> None:
    parsed = parse(text)
    assert [(c.gpu, c.uuid) for c in parsed] == [(0, UUID0), (1, UUID1)][:cards]
    for card in parsed:
        assert set(card.counts) == {(link, counter) for link in range(links)
                                    for counter in ("replay", "recovery", "crc")}
        assert set(card.counts.values()) == {0} and nvlink_total(card.counts) == 0


def test_a_card_line_without_uuid_is_matched_by_index() -> None:
    """The published GB300 excerpt prints ``GPU 0: NVIDIA GB300`` with no UUID."""
    text = "GPU 0: NVIDIA GB300\n\t Link 0: Replay Errors: 0\n\t Link 0: Recovery Errors: 0\n" \
           "\t Link 0: CRC Errors: 0\n"
    (card,) = parse(text)
    assert (card.gpu, card.uuid, dict(card.counts)) == (
        0, None, {(0, "replay"): 0, (0, "recovery"): 0, (0, "crc"): 0})


def test_counters_of_other_names_are_not_read_no_real_capture() -> None:
    """Names from a description of a B300 with 595.91.07 (no published run with values): a
    card that prints only those has no NVLink counters (unknown), never zeros."""
    text = ("GPU 0: NVIDIA B300 SXM6 AC (UUID: GPU-b)\n\t Link 0: Rx Errors: 0\n"
            "\t Link 0: Effective Errors: 0\n\t Link 0: FEC Errors - 0: 123456\n")
    (card,) = parse(text)
    assert dict(card.counts) == {} and nvlink_total(card.counts) is None


def test_an_unusable_value_is_unknown_an_anomaly_and_makes_the_total_unknown() -> None:
    reader = CellReader()
    (card,) = parse(H100.replace("Link 3: CRC Errors: 0", "Link 3: CRC Errors: many"), reader)
    assert card.counts[(3, "crc")] is None and card.counts[(2, "crc")] == 0
    assert len(reader.anomalies) == 1 and "link 3 crc" in reader.anomalies[0]
    assert nvlink_total(card.counts) is None


def test_a_link_beyond_the_eighteen_nvml_knows_is_left_out_as_an_anomaly() -> None:
    reader = CellReader()
    (card,) = parse(H100 + "         Link 18: CRC Errors: 5\n", reader)
    assert max(link for link, _ in card.counts) == 17
    assert reader.anomalies == ["nvidia-smi nvlink -e gpu 0 link 18: beyond the 18 links a "
                                "card can have; left out"]


def test_text_that_is_no_answer_or_names_an_index_twice_is_refused() -> None:
    with pytest.raises(ParseError, match="no 'GPU <index>:' line"):
        parse("NVML: Unable to retrieve NVLink information as all links are inActive\n")
    with pytest.raises(ParseError, match="one GPU index twice"):
        parse(H100 + H100)


def test_cards_are_matched_by_index_unless_the_uuids_differ() -> None:
    readings = tuple(CardReading(vendor="nvidia", gpu=g, uuid=u, model="A100")
                     for g, u in ((0, UUID0), (1, "GPU-other"), (2, None)))
    got = nvidia_nvlink.with_nvlink(readings, parse(A100))
    assert [len(r.nvlink_errors) for r in got] == [36, 0, 0]


def test_each_link_and_card_total_is_exported(make_exporter: MakeExporter,
                                              tool_env: dict[str, str], tmp_path: Path) -> None:
    """Non-zero values from the fake's state file (simulated: no published run has any)."""
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"cards": {"0": {"Link 3: CRC Errors": 12,
                                                 "Link 17: Replay Errors": 4},
                                           "1": {}}}))
    tool_env["FAKE_NVIDIA_STATE"] = str(state)
    exporter = make_exporter()
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_nvlink_errors_total", **CARD0, link="3", counter="crc") == 12
    assert metrics.get("gpu_health_nvlink_errors_total", **CARD0, link="17",
                       counter="replay") == 4
    assert len(metrics.series("gpu_health_nvlink_errors_total")) == 2 * 18 * 3
    assert metrics.get("gpu_health_nvlink_card_errors_total", **CARD0) == 16
    assert metrics.get("gpu_health_nvlink_card_errors_total", **CARD1) == 0


@pytest.mark.parametrize("mode, reason", [("exit:6", "exit_code"), ("garbage", "parse"),
                                          ("hang", "timeout"), ("huge", "oversize")])
def test_a_failing_read_costs_only_the_nvlink_counters_and_pauses_until_the_next_probe(
        make_exporter: MakeExporter, tool_env: dict[str, str], clock: FakeClock, mode: str,
        reason: str, tmp_path: Path) -> None:
    mode_file = tmp_path / "nvlink-mode"
    mode_file.write_text(mode)
    tool_env["FAKE_NVIDIA_NVLINK_MODE_FILE"] = str(mode_file)
    exporter = make_exporter(timeout_s=2.0)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_exporter_collect_success", vendor="nvidia") == 1
    assert metrics.get("gpu_health_exporter_collect_errors_total", vendor="nvidia",
                       reason=reason) == 1
    assert metrics.get("gpu_health_pcie_replays_total", **CARD0) == 9
    assert metrics.series("gpu_health_nvlink_errors_total") == []  # unknown, not 0
    assert metrics.get("gpu_health_nvlink_card_errors_total", **CARD0) is None
    mode_file.write_text("ok")
    clock.advance(29 * 60)
    exporter.loop.tick()  # paused: not asked, still unknown
    log = Path(tool_env["FAKE_NVIDIA_LOG"])
    assert invocations(log).count(["nvlink", "-e"]) == 1
    clock.advance(2 * 60)
    exporter.loop.tick()  # the probe is due again: asked, and read
    assert invocations(log).count(["nvlink", "-e"]) == 2
    assert scrape(exporter.registry).get("gpu_health_nvlink_card_errors_total", **CARD0) == 0
