"""Real ``nvidia-smi`` 580.159.04 output of one H200, replayed through the fake and the exporter.

The files in ``tests/fixtures/nvidia-h200-580.159.04/`` were captured on a lent machine with a
real H200 (how: that folder's CAPTURE.md). They check three things the third-party
captures could not:

- the fake ``nvidia-smi``, given the real help text and the real all-fields CSV, answers the
  exporter's exact query (read from the exporter's own debug log on that machine) byte for byte
  as the real driver did, with and without the header;
- the exporter, run as a process against that replay, exports every health value ``nvidia-smi
  -q`` shows for the card, and nothing where ``-q`` says ``N/A`` (retired pages on Hopper);
- its card series and field-support series equal what the exporter exported on the real card
  (plus the candidates added after the capture: the recovery action and pending retirement,
  the PCIe link, the clock slowdown counters, the fabric registration and the PCIe replay
  counters, which the exporter reads from this very ``-q`` report; and the
  ``duplicate_uuid`` error reason added after it), and
  both expositions pass the real ``promtool check metrics``.

Every error count of this card is 0, so these tests show that a known 0 stays a known 0; they
do not show how a non-zero SRAM or DRAM count adds up into the aggregate totals.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from gpu_health.exporter.parsers import nvidia
from gpu_health.exporter.sources import SOURCE_CLASSES
from tests.shared import FIXTURES

from .support import NVIDIA_SMI, Scrape
from .test_main import NO_KERNEL_LOG, promtool_check, run

CAPTURE = FIXTURES / "nvidia-h200-580.159.04"
SUFFIX = "h200-580.159.04"
UUID = "GPU-555dc98e-8792-c819-509d-0c0693544ae6"
# The real machine had no other vendor's tool; switched off here, they export the same.
ONLY_NVIDIA = [arg for cls in SOURCE_CLASSES if cls.vendor != "nvidia" for arg in (cls.flag, "")]
REPLAY_ARGS = ["--once", "--nvidia-smi", NVIDIA_SMI, *ONLY_NVIDIA, *NO_KERNEL_LOG]
# Candidate fields added after the capture: the capture's query did not ask for
# them, the help lists them, and the all-fields CSV answers them ("None", "[N/A]", "5", "0").
RECOVERY_FIELDS = (nvidia.RECOVERY_ACTION, nvidia.PAGES_PENDING)
NEW_SINCE_CAPTURE = (*RECOVERY_FIELDS, *nvidia.PCIE_FIELDS, *nvidia.SLOWDOWN_FIELDS,
                     nvidia.FABRIC_STATE, nvidia.FABRIC_STATUS)
LINK_FAMILIES = ("gpu_health_pcie_link_generation", "gpu_health_pcie_link_generation_max",
                 "gpu_health_pcie_link_width", "gpu_health_pcie_link_width_max",
                 "gpu_health_clock_slowdown_seconds_total")
NEW_FAMILIES = ("gpu_health_recovery_action", "gpu_health_retired_pages_pending",
                *LINK_FAMILIES, "gpu_health_fabric_state", "gpu_health_fabric_status_success",
                "gpu_health_pcie_replays_total", "gpu_health_pcie_replay_rollovers_total")
NEW_REASONS = ("duplicate_uuid",)  # error reasons added after the capture
VARYING = {  # self-metrics that differ from run to run by nature
    "gpu_health_exporter_collect_duration_seconds",
    "gpu_health_exporter_last_success_timestamp_seconds",
}


def capture(name: str) -> Path:
    return CAPTURE / name.format(SUFFIX)


def exporter_query_argv() -> list[str]:
    """The ``--query-gpu`` arguments the exporter ran on the real card (its debug log)."""
    log = capture("gpu-health-exporter-once-debug-{}.log").read_text()
    ran = re.search(r"DEBUG exporter\.runner: ran (.*--query-gpu=.*): exit status 0", log)
    assert ran is not None, "the debug log names no --query-gpu run"
    return shlex.split(ran.group(1))[1:]


def replay_env(tool_env: dict[str, str]) -> dict[str, str]:
    return {
        **tool_env,
        "FAKE_NVIDIA_HELP": str(capture("nvidia-smi-help-query-gpu-{}.txt")),
        "FAKE_NVIDIA_QUERY": str(capture("nvidia-smi-query-gpu-all-fields-{}.csv")),
        "FAKE_NVIDIA_Q": str(capture("nvidia-smi-q-{}.txt")),
        # nvidia-smi nvlink -e was not captured on this card: the replay fails it (exit 6)
        "FAKE_NVIDIA_NVLINK_MODE": "exit:6",
    }


def q_values(text: str) -> dict[tuple[str, ...], str]:
    """``nvidia-smi -q`` as {(section, ..., key): value}, sections found by indentation."""
    values: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("="):
            continue
        depth = len(line) - len(line.lstrip())
        # "Key   : value"; a PCI address ("GPU 00000000:00:06.0") has colons but no " : ".
        key, _, value = line.strip().partition(" : ")
        while stack and stack[-1][0] >= depth:
            stack.pop()
        path = (*(name for _, name in stack), key.strip())
        if value.strip():
            values[path] = value.strip()
        else:
            stack.append((depth, key.strip()))
    return values


def expected_from_q() -> dict[tuple[str, tuple[tuple[str, str], ...]], float | None]:
    """What the exporter must export for the card, read independently from ``-q``."""
    q = {path[1:]: v for path, v in q_values(capture("nvidia-smi-q-{}.txt").read_text()).items()
         if path[0] == "GPU 00000000:00:06.0"}
    ecc = ("ECC Errors", "Aggregate")

    def number(*path: str) -> float | None:
        value = q[path].removesuffix(" bank(s)")
        return None if value == "N/A" else float(value)

    def flag(*path: str) -> float:
        return {"No": 0.0, "Yes": 1.0}[q[path]]

    retired = [number("Retired Pages", k) for k in ("Single Bit ECC", "Double Bit ECC")]
    known_retired = [count for count in retired if count is not None]
    card = (("gpu", "0"), ("uuid", q[("GPU UUID",)]), ("vendor", "nvidia"))
    levels = {level: number("Remapped Rows", "Bank Remap Availability Histogram", level.title())
              for level in ("max", "high", "partial", "low", "none")}
    action = q[("GPU Recovery Action",)].lower().replace(" ", "_")
    link = ("PCI", "GPU Link Info")
    slowdown = {"sw_power_cap": "SW Power Capping", "sw_thermal_slowdown": "SW Thermal Slowdown",
                "hw_thermal_slowdown": "HW Thermal Slowdown",
                "hw_power_brake_slowdown": "HW Power Braking"}
    pending = q[("Retired Pages", "Pending Page Blacklist")]
    return {
        **{("gpu_health_recovery_action", (*card, ("action", a))): float(a == action)
           for a in ("none", "gpu_reset", "node_reboot", "drain_p2p", "drain_and_reset")},
        ("gpu_health_retired_pages_pending", card): None if pending == "N/A" else flag(
            "Retired Pages", "Pending Page Blacklist"),
        ("gpu_health_gpu_info", (*card, ("model", q[("Product Name",)]))): 1.0,
        ("gpu_health_pcie_link_generation", card): number(*link, "PCIe Generation", "Current"),
        ("gpu_health_pcie_link_generation_max", card): number(*link, "PCIe Generation", "Max"),
        ("gpu_health_pcie_link_width", card): float(q[(*link, "Link Width", "Current")][:-1]),
        ("gpu_health_pcie_link_width_max", card): float(q[(*link, "Link Width", "Max")][:-1]),
        **{("gpu_health_clock_slowdown_seconds_total", (*card, ("reason", reason))):
           float(q[("Clocks Event Reasons Counters", name)].removesuffix(" us")) / 1e6
           for reason, name in slowdown.items()},
        ("gpu_health_pcie_replays_total", card): number("PCI", "Replays Since Reset"),
        ("gpu_health_pcie_replay_rollovers_total", card): number("PCI", "Replay Number Rollovers"),
        ("gpu_health_fabric_status_success", card): None if q[("Fabric", "Status")] == "N/A"
        else float(q[("Fabric", "Status")] == "Success"),
        ("gpu_health_ecc_corrected_total", card): sum(
            number(*ecc, k) or 0 for k in ("SRAM Correctable", "DRAM Correctable")),
        ("gpu_health_ecc_uncorrected_total", card): sum(number(*ecc, k) or 0 for k in (
            "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED", "DRAM Uncorrectable")),
        ("gpu_health_retired_pages", card): (
            sum(known_retired) if len(known_retired) == len(retired) else None),
        ("gpu_health_remapped_rows_pending", card): flag("Remapped Rows", "Pending"),
        ("gpu_health_remapped_rows_failure", card): flag(
            "Remapped Rows", "Remapping Failure Occurred"),
        ("gpu_health_remapped_rows_correctable", card): number(
            "Remapped Rows", "Correctable Error"),
        ("gpu_health_remapped_rows_uncorrectable", card): number(
            "Remapped Rows", "Uncorrectable Error"),
        **{("gpu_health_remap_bank_availability", (*card, ("level", level))): value
           for level, value in levels.items()},
    }


def stable_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {key: value for key, value in Scrape(text).samples.items() if key[0] not in VARYING}


@pytest.mark.parametrize("fmt, name", [
    ("--format=csv,noheader,nounits",
     "nvidia-smi-query-gpu-exporter-fields-noheader-nounits-{}.csv"),
    ("--format=csv", "nvidia-smi-query-gpu-exporter-fields-{}.csv"),
])
def test_the_fake_answers_the_exporters_query_as_the_real_driver_did(
    tool_env: dict[str, str], fmt: str, name: str
) -> None:
    query, _ = exporter_query_argv()
    answer = subprocess.run([NVIDIA_SMI, query, fmt], env=replay_env(tool_env),
                            capture_output=True, text=True, timeout=30, check=True)
    assert answer.stdout == capture(name).read_text()


def test_the_real_help_text_lists_every_candidate_field_and_the_exporter_asked_for_them() -> None:
    fields = nvidia.parse_help(capture("nvidia-smi-help-query-gpu-{}.txt").read_text())
    assert [f for f in nvidia.PROBED_FIELDS if not fields.supports(f)] == []
    query, fmt = exporter_query_argv()
    assert fmt == "--format=csv,noheader,nounits"
    planned = nvidia.plan_columns(fields)
    new = len(NEW_SINCE_CAPTURE)
    assert planned[-new:] == NEW_SINCE_CAPTURE
    assert tuple(query.removeprefix("--query-gpu=").split(",")) == planned[:-new]


def test_the_real_query_output_parses_to_the_values_q_shows() -> None:
    query, _ = exporter_query_argv()
    columns = query.removeprefix("--query-gpu=").split(",")
    text = capture("nvidia-smi-query-gpu-exporter-fields-noheader-nounits-{}.csv").read_text()
    parsed = nvidia.parse_query(text, columns)
    assert parsed.anomalies == ()
    (card,) = parsed.readings
    assert (card.gpu, card.uuid, card.model, card.pci_bus_id) == (
        0, UUID, "NVIDIA H200", "00000000:00:06.0")
    assert card.counters["retired_pages"] is None  # "[N/A]" on Hopper: unknown, not 0
    assert card.counters["ecc_corrected_total"] == 0
    assert card.remap["remap_banks_max"] == 3072


def test_the_recovery_action_and_pending_retirement_as_the_driver_printed_them() -> None:
    text = capture("nvidia-smi-query-gpu-pending-recovery-noheader-nounits-{}.csv").read_text()
    parsed = nvidia.parse_query(text, ["index", "uuid", *reversed(RECOVERY_FIELDS)])
    assert parsed.anomalies == ()
    (card,) = parsed.readings
    assert card.recovery_action == "none"  # "None" is a value: nothing to do
    assert card.pages_pending is None  # "[N/A]" on Hopper: unknown, not 0


def test_the_replayed_card_exports_what_nvidia_smi_q_shows(tool_env: dict[str, str]) -> None:
    result = run(REPLAY_ARGS, replay_env(tool_env))
    assert result.returncode == 0, result.stderr
    got = Scrape(result.stdout)
    for (name, labels), value in expected_from_q().items():
        assert got.get(name, **dict(labels)) == value, (name, labels)
    checked = promtool_check(result.stdout)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_replay_exports_what_the_exporter_exported_on_the_real_card(
    tool_env: dict[str, str]
) -> None:
    real = capture("gpu-health-exporter-once-{}.prom").read_text()
    checked = promtool_check(real)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    result = run(REPLAY_ARGS, replay_env(tool_env))
    assert result.returncode == 0, result.stderr
    now = stable_samples(result.stdout)
    # the failed nvlink -e (not captured) costs one exit_code error and no other value
    failed = ("gpu_health_exporter_collect_errors_total",
              frozenset({("vendor", "nvidia"), ("reason", "exit_code")}))
    assert now[failed] == stable_samples(real)[failed] + 1
    now[failed] -= 1
    added = {k for k in now if k[0] in NEW_FAMILIES or (
        k[0] == "gpu_health_exporter_nvidia_field_supported"
        and dict(k[1])["field"] in NEW_SINCE_CAPTURE) or (
        k[0] == "gpu_health_exporter_collect_errors_total"
        and dict(k[1])["reason"] in NEW_REASONS)}
    assert {k: v for k, v in now.items() if k not in added} == stable_samples(real)
    assert {k[0] for k in added} == {"gpu_health_recovery_action", *LINK_FAMILIES,
                                     "gpu_health_pcie_replays_total",
                                     "gpu_health_pcie_replay_rollovers_total",
                                     "gpu_health_exporter_nvidia_field_supported",
                                     "gpu_health_exporter_collect_errors_total"}


def test_the_evaluator_stores_the_real_recovery_action_and_v2_judges_the_card(
    tool_env: dict[str, str]
) -> None:
    """The replayed H200 through the evaluator's parser: the driver's "None" becomes NVML
    value 0 and pending retirement ("[N/A]" on Hopper) stays unknown; policy v2 reads both."""
    from gpu_health.evaluator.config.rules import load_action_policy
    from gpu_health.evaluator.ingest.cards import parse_cards
    from gpu_health.evaluator.rules.actions import CardState, recommend

    result = run(REPLAY_ARGS, replay_env(tool_env))
    assert result.returncode == 0, result.stderr
    (card,) = parse_cards(result.stdout).cards
    assert card.details.recovery_action == 0
    assert card.details.retired_pages_pending is None
    state = CardState(card.counters.remapped_rows_pending, card.counters.remapped_rows_failure,
                      card.details.remap_banks_none, recovery_action="none")
    assert recommend(state, load_action_policy()).action == "none"
