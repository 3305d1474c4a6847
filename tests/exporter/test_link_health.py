"""The PCIe link, clock slowdown time and fabric registration, read from real nvidia-smi output.

Each case replays a third-party all-fields capture (``../shared/fixtures/nvidia``) through the
fake ``nvidia-smi`` with that driver's own help text, asks the exporter's planned query, and
checks what the parser reads against what the capture shows: a Hopper in an NVSwitch system
(fabric registration completed, status Success), an L40S and RTX cards without a fabric (its
fields ``N/A``: unknown, absent), an idle RTX 2080 Super whose link trained down from gen 3 to
gen 1, and software power capping that held the clocks down for 212 s. The exporter's output
for the same replay passes ``promtool check metrics`` (the H200 of our own capture:
test_real_nvidia_h200.py).
"""

from __future__ import annotations

import subprocess

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry

from gpu_health.contract import FABRIC_STATES, HEALTH_KEYS
from gpu_health.evaluator.ingest.cards import parse_cards
from gpu_health.exporter.collector import card_families
from gpu_health.exporter.parsers import nvidia
from gpu_health.exporter.tool_output import CardReading
from tests.shared import require_shared

from .support import NVIDIA_SMI, Scrape, scrape

# capture -> (help text, (gen, gen max, width, width max), sw_power_cap µs, fabric, status ok)
CASES = {
    "query-h100-590.48.01-full.csv": ("help-query-gpu-590.48.01-linux.txt", (5, 5, 16, 16), 0,
                                      "completed", 1),
    "query-h200-590.48.01-full.csv": ("help-query-gpu-590.48.01-linux.txt", (5, 5, 16, 16), 0,
                                      "completed", 1),
    "query-l40s-595.80-full.csv": ("help-query-gpu-595.71.05-linux.txt", (4, 4, 16, 16),
                                   200_740_215, None, None),
    "query-rtx2080s-595.71.05-linux-full.csv": ("help-query-gpu-595.71.05-linux.txt",
                                                (1, 3, 16, 16), 212_553_937, None, None),
    "query-rtx4080s-595.71.05-full.csv": ("help-query-gpu-595.71.05-linux.txt", (1, 4, 16, 16),
                                          0, None, None),
}


class _Cards:
    """A collector of fixed readings, exported as the exporter's collector exports them."""

    def __init__(self, cards: list[CardReading]) -> None:
        self.cards = cards

    def collect(self) -> list[Metric]:
        return card_families(self.cards)


def exported(cards: list[CardReading]) -> Scrape:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Cards(cards))
    return scrape(registry)


def replay(capture: str, tool_env: dict[str, str]) -> CardReading:
    folder = require_shared() / "nvidia"
    help_name = CASES[capture][0]
    help_fields = nvidia.parse_help((folder / help_name).read_text())
    columns = nvidia.plan_columns(help_fields)
    env = {**tool_env, "FAKE_NVIDIA_HELP": str(folder / help_name),
           "FAKE_NVIDIA_QUERY": str(folder / capture)}
    answer = subprocess.run([NVIDIA_SMI, f"--query-gpu={','.join(columns)}",
                             "--format=csv,noheader,nounits"], env=env, capture_output=True,
                            text=True, timeout=30, check=True)
    parsed = nvidia.parse_query(answer.stdout, columns)
    assert parsed.anomalies == ()
    (card,) = parsed.readings
    return card


@pytest.mark.parametrize("capture", list(CASES))
def test_each_capture_reads_as_the_driver_printed_it(capture: str,
                                                     tool_env: dict[str, str]) -> None:
    _, link, power_cap_us, fabric, ok = CASES[capture]
    card = replay(capture, tool_env)
    assert tuple(card.pcie.values()) == link
    assert card.slowdown_us == {"sw_power_cap": power_cap_us, "sw_thermal_slowdown": 0,
                                "hw_thermal_slowdown": 0, "hw_power_brake_slowdown": 0}
    assert (card.fabric_state, card.fabric_ok) == (fabric, ok)


def test_the_exported_series_of_an_idle_link_and_a_power_cap(tool_env: dict[str, str]) -> None:
    card = replay("query-rtx2080s-595.71.05-linux-full.csv", tool_env)
    got = exported([card])
    labels = {"gpu": "0", "uuid": card.uuid or "", "vendor": "nvidia"}
    assert got.get("gpu_health_pcie_link_generation", **labels) == 1.0
    assert got.get("gpu_health_pcie_link_generation_max", **labels) == 3.0
    assert got.get("gpu_health_clock_slowdown_seconds_total", reason="sw_power_cap",
                   **labels) == pytest.approx(212.553937)
    assert got.get("gpu_health_fabric_state", state="completed", **labels) is None  # N/A
    assert got.get("gpu_health_fabric_status_success", **labels) is None


@pytest.mark.parametrize(("state", "status", "expected"), [
    ("Completed", "Success", ("completed", 1)),
    ("Completed", "Timeout", ("completed", 0)),  # an NVML error code: registration failed
    ("In Progress", "Success", ("in_progress", None)),  # status counts once completed only
    ("Not Supported", "N/A", ("not_supported", None)),
    ("[N/A]", "[N/A]", (None, None)),
    ("Rebooting", "Success", (None, None)),  # text nobody documented: unknown, counted
])
def test_the_fabric_fields(state: str, status: str, expected: tuple[object, object]) -> None:
    parsed = nvidia.parse_query(f"0, {state}, {status}\n",
                                ["index", nvidia.FABRIC_STATE, nvidia.FABRIC_STATUS])
    (card,) = parsed.readings
    assert (card.fabric_state, card.fabric_ok) == expected
    assert len(parsed.anomalies) == (1 if state == "Rebooting" else 0)


def test_the_newer_generation_field_wins_and_the_older_stands_in() -> None:
    columns = ["index", "pcie.link.gen.gpucurrent", "pcie.link.gen.current"]
    (card,) = nvidia.parse_query("0, 4, 1\n", columns).readings
    assert card.pcie["pcie_link_generation"] == 4
    (card,) = nvidia.parse_query("0, [N/A], 2\n", columns).readings
    assert card.pcie["pcie_link_generation"] == 2
    (card,) = nvidia.parse_query("0, 3\n", ["index", "pcie.link.width.current"]).readings
    assert card.pcie == {"pcie_link_generation": None, "pcie_link_generation_max": None,
                         "pcie_link_width": 3, "pcie_link_width_max": None}


@pytest.mark.parametrize("capture", list(CASES))
def test_the_evaluator_reads_back_what_it_stores(capture: str, tool_env: dict[str, str]) -> None:
    """The exporter's exposition of each capture, read by the evaluator's scrape parser: the
    link width, the thermal and power-brake slowdown time (whole microseconds, as the driver
    counted) and the fabric, the details it stores; the power cap and the generation are left
    out (docs/exporter.md says why)."""
    _, (_, _, width, width_max), _, fabric, ok = CASES[capture]
    card = replay(capture, tool_env)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Cards([card]))
    extraction = parse_cards(generate_latest(registry).decode())
    (read,) = extraction.cards
    assert {k: getattr(read.details, k) for k in HEALTH_KEYS} == {
        "pcie_link_width": width, "pcie_link_width_max": width_max, "sw_thermal_slowdown_us": 0,
        "hw_thermal_slowdown_us": 0, "hw_power_brake_slowdown_us": 0,
        "fabric_state": None if fabric is None else FABRIC_STATES.index(fabric),
        "fabric_status_success": ok,
        # from nvidia-smi -q and nvlink -e, not this CSV: test_pcie_replays.py, test_nvlink.py
        "pcie_replays": None, "nvlink_errors": None}
    assert extraction.ignored_series == {} and extraction.unknown_values == {}
