"""The card's health beyond memory through the evaluator: the PCIe link width, the thermal and
power-brake slowdown time, the fabric registration and the PCIe replays, parsed from the
exposition (the series the exporter writes: tests/exporter/test_link_health.py replays real
captures into them), written change-only with the counters and stored in nullable columns
(migrations 13 and 14: the write and the migrations are tested with the other details in
test_remap_ingest.py)."""

from __future__ import annotations

import pytest

from gpu_health.contract import FABRIC_STATES
from gpu_health.evaluator.ingest.cards import parse_cards
from gpu_health.evaluator.model import CardDetails

LABELS = 'gpu="0",uuid="GPU-a",vendor="nvidia"'


def slowdown(reason: str, seconds: str) -> str:
    return f'gpu_health_clock_slowdown_seconds_total{{{LABELS},reason="{reason}"}} {seconds}\n'


def fabric(current: str) -> str:
    return "".join(f'gpu_health_fabric_state{{{LABELS},state="{s}"}} '
                   f'{1 if s == current else 0}\n' for s in FABRIC_STATES)


def test_every_stored_signal_is_parsed() -> None:
    text = (f"gpu_health_ecc_corrected_total{{{LABELS}}} 3\n"
            f"gpu_health_pcie_link_width{{{LABELS}}} 8\n"
            f"gpu_health_pcie_link_width_max{{{LABELS}}} 16\n"
            f"gpu_health_pcie_link_generation{{{LABELS}}} 1\n"
            + slowdown("sw_power_cap", "212.553937") + slowdown("sw_thermal_slowdown", "0.0")
            + slowdown("hw_thermal_slowdown", "3600.000001")
            + slowdown("hw_power_brake_slowdown", "1.5e-05") + fabric("completed")
            + f"gpu_health_fabric_status_success{{{LABELS}}} 0\n"
            + f"gpu_health_pcie_replays_total{{{LABELS}}} 67\n"
            + f"gpu_health_pcie_replay_rollovers_total{{{LABELS}}} 0\n"
            + f'gpu_health_nvlink_errors_total{{{LABELS},link="3",counter="crc"}} 12\n'
            + f"gpu_health_nvlink_card_errors_total{{{LABELS}}} 12\n"
            + 'gpu_health_nvswitch_sxid_errors_total{nvswitch="0",pci_bus_id="0000:05:00",'
            'sxid="20034",severity="fatal"} 1\n')
    extraction = parse_cards(text)
    (card,) = extraction.cards
    assert card.details == CardDetails(
        pcie_link_width=8, pcie_link_width_max=16, sw_thermal_slowdown_us=0,
        hw_thermal_slowdown_us=3_600_000_001, hw_power_brake_slowdown_us=15,
        fabric_state=FABRIC_STATES.index("completed"), fabric_status_success=0,
        pcie_replays=67, nvlink_errors=12)  # the rollovers, each link: not kept
    assert extraction.sxids == (((0, "0000:05:00", 20034, True), 1),)  # the node's, not the card's
    assert extraction.ignored_series == {} and extraction.unknown_values == {}


@pytest.mark.parametrize(("seconds", "reason"), [("NaN", "nan"), ("+Inf", "inf"),
                                                 ("-1", "negative")])
def test_a_slowdown_time_that_is_no_time_is_unknown(seconds: str, reason: str) -> None:
    extraction = parse_cards(f"gpu_health_ecc_corrected_total{{{LABELS}}} 3\n"
                             + slowdown("hw_thermal_slowdown", seconds))
    (card,) = extraction.cards
    assert card.details.hw_thermal_slowdown_us is None
    assert extraction.unknown_values == {reason: 1}


def test_an_unknown_reason_is_counted_and_a_duplicate_is_unknown() -> None:
    text = (slowdown("cosmic_rays", "1") + slowdown("hw_thermal_slowdown", "1")
            + slowdown("hw_thermal_slowdown", "2"))
    extraction = parse_cards(text)
    (card,) = extraction.cards
    assert card.details.hw_thermal_slowdown_us is None
    assert extraction.ignored_series == {"bad_reason_label": 1}
    assert extraction.unknown_values == {"duplicate": 1}


def test_a_broken_fabric_state_set_is_unknown() -> None:
    text = fabric("completed") + f'gpu_health_fabric_state{{{LABELS},state="in_progress"}} 1\n'
    extraction = parse_cards(text)
    assert extraction.cards[0].details.fabric_state is None
    two = fabric("completed").replace('state="not_started"} 0', 'state="not_started"} 1')
    extraction = parse_cards(two)
    assert extraction.cards[0].details.fabric_state is None
    assert extraction.unknown_values == {"bad_state_set": 1}
