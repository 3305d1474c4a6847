"""The PCIe replay counters: read from ``nvidia-smi -q`` after the CSV query, matched to the
CSV's cards, exported as counters, and never allowed to cost the other values of a tick.

The values themselves are checked against every third-party ``-q`` report in
conformance_q.py and against our own H200 capture in test_real_nvidia_h200.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_health.errors import ParseError
from gpu_health.exporter.parsers import nvidia_q
from gpu_health.exporter.parsers.cells import CellReader
from gpu_health.exporter.tool_output import CardReading
from tests.shared import FIXTURES

from .conftest import MakeExporter
from .support import scrape

H100_Q = (FIXTURES / "nvidia-smi-q-h100-590.48.01.txt").read_text()
UUID0 = "GPU-00000000-0000-0000-0000-000000000000"
CARD0 = {"gpu": "0", "uuid": UUID0, "vendor": "nvidia"}


def card(gpu: int, uuid: str | None, bus: str | None) -> CardReading:
    return CardReading(vendor="nvidia", gpu=gpu, uuid=uuid, model="H100", pci_bus_id=bus)


def replays(bus: str, uuid: str | None, count: int) -> nvidia_q.PcieReplays:
    return nvidia_q.PcieReplays(bus, uuid, count, 0)


def test_sections_are_matched_by_uuid_then_by_an_address_no_uuid_contradicts() -> None:
    cards = (card(0, "GPU-a", "00000000:19:00.0"), card(1, None, "00000000:3B:00.0"),
             card(2, "GPU-c", "00000000:4C:00.0"), card(3, "GPU-d", "00000000:5D:00.0"))
    sections = (replays("00000000:99:00.0", "GPU-a", 67),  # same card, address moved
                replays("00000000:3b:00.0", "GPU-b", 63),  # the CSV named no UUID
                replays("00000000:4C:00.0", "GPU-x", 52),  # another card at card 2's address
                replays("00000000:5D:00.0", None, 43))  # -q named no UUID
    got = {r.gpu: r.pcie_replays for r in nvidia_q.with_replays(cards, sections)}
    assert got == {0: 67, 1: 63, 2: None, 3: 43}


def test_text_that_is_no_report_or_names_a_card_twice_is_refused() -> None:
    with pytest.raises(ParseError, match="no 'GPU <PCI address>' section"):
        nvidia_q.parse_replays("Failed to initialize NVML: Unknown Error\n", CellReader())
    doubled = H100_Q + H100_Q[H100_Q.index("GPU 0000"):]
    with pytest.raises(ParseError, match="one PCI address twice"):
        nvidia_q.parse_replays(doubled, CellReader())


def test_a_value_that_is_no_count_is_unknown_and_an_anomaly() -> None:
    reader = CellReader()
    text = H100_Q.replace(": 9\n", ": nine\n").replace("Rollovers                        : 0",
                                                         "Rollovers                        : N/A")
    (only,) = nvidia_q.parse_replays(text, reader)
    assert (only.replays, only.rollovers) == (None, None)
    assert len(reader.anomalies) == 1 and "Replays Since Reset" in reader.anomalies[0]


def test_each_card_exports_its_own_counters(make_exporter: MakeExporter,
                                            tool_env: dict[str, str], tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"cards": {"0": {"Replays Since Reset": 120},
                                           "1": {"Replay Number Rollovers": 2}}}))
    tool_env["FAKE_NVIDIA_STATE"] = str(state)
    exporter = make_exporter()
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_pcie_replays_total", **CARD0) == 120
    card1 = {"gpu": "1", "uuid": "GPU-00000000-0000-0000-0000-000000000001", "vendor": "nvidia"}
    assert metrics.get("gpu_health_pcie_replays_total", **card1) == 9
    assert metrics.get("gpu_health_pcie_replay_rollovers_total", **card1) == 2


@pytest.mark.parametrize("mode, reason", [("exit:6", "exit_code"), ("garbage", "parse"),
                                          ("hang", "timeout"), ("huge", "oversize")])
def test_a_failing_q_costs_only_the_replay_counters(make_exporter: MakeExporter,
                                                    tool_env: dict[str, str], mode: str,
                                                    reason: str) -> None:
    tool_env["FAKE_NVIDIA_Q_MODE"] = mode
    exporter = make_exporter(timeout_s=2.0)
    exporter.loop.tick()
    metrics = scrape(exporter.registry)
    assert metrics.get("gpu_health_exporter_collect_success", vendor="nvidia") == 1
    # a hanging -q takes the whole tool timeout, so nvlink -e, run after it, gets no time
    assert metrics.get("gpu_health_exporter_collect_errors_total", vendor="nvidia",
                       reason=reason) == (2 if mode == "hang" else 1)
    assert metrics.get("gpu_health_ecc_corrected_total", **CARD0) == 0
    assert metrics.get("gpu_health_pcie_replays_total", **CARD0) is None  # unknown, not 0
    assert metrics.series("gpu_health_pcie_replay_rollovers_total") == []
