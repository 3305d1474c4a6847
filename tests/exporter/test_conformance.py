"""Conformance over every third-party capture in ../shared/fixtures/nvidia and
../shared/fixtures/vendors (read in place, never copied).

Every help text is paired with every full ``--query-gpu`` CSV through the fake nvidia-smi, so
the probe + query path runs against each captured driver and GPU, with the ``nvidia-smi -q``
report of the same machine where one was captured (conformance_q.py). The kernel logs
(``nvidia/*.log``) have their Xid lines counted per card (conformance_xid.py); every vendor
capture is checked against the values it shows or proven deliberately unsupported
(conformance_vendors.py). Every other file is listed as not applicable with the reason, in its
test id; a file in neither list fails. Without ../shared the whole module skips with the reason.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpu_health.contract import CounterKey
from gpu_health.errors import CollectError, ParseError
from gpu_health.exporter.parsers import (
    ascend,
    enflame,
    hygon,
    iluvatar,
    kunlunxin,
    kunlunxin_xml,
    nvidia,
)
from gpu_health.exporter.parsers.cells import CellReader, is_declared_unknown
from gpu_health.exporter.sources.nvidia import NvidiaSource
from gpu_health.runner import ToolRunner
from tests.shared import SHARED, require_shared, shared_available

from . import conformance_vendors as vendors
from .conformance_q import Q_CHECKS, Q_REPORTS, matching_report
from .conformance_support import Case, Check
from .conformance_xid import LOG_CHECKS
from .support import NVIDIA_SMI, FakeClock, invocations

NVIDIA_DIR = SHARED / "fixtures" / "nvidia"
VENDORS_DIR = SHARED / "fixtures" / "vendors"
H100_UUID = "GPU-00000000-0000-0000-0000-000000000000"  # the captures mask UUIDs this way


@dataclass(frozen=True)
class CardFacts:
    """What one full --query-gpu capture shows for its card."""

    model: str
    bus: str
    ecc: int | None  # both aggregate ECC totals
    remap: int | None  # both remapped_rows flags ("No" -> 0)


H100 = "NVIDIA H100 80GB HBM3"
RTX2080S = "NVIDIA GeForce RTX 2080 SUPER"
FULL_CSV: dict[str, CardFacts] = {
    "query-h100-590.48.01-full.csv": CardFacts(H100, "00000000:00:09.0", 0, 0),
    "query-h100-mig-590.48.01-full.csv": CardFacts(H100, "00000000:00:09.0", 0, None),
    "query-h200-590.48.01-full.csv": CardFacts("NVIDIA H200", "00000000:83:00.0", 0, 0),
    "query-h200-mig-590.48.01-full.csv": CardFacts("NVIDIA H200", "00000000:83:00.0", 0, None),
    "query-l40s-595.80-full.csv": CardFacts("NVIDIA L40S", "00000000:01:00.0", 0, 0),
    "query-rtx4080s-595.71.05-full.csv": CardFacts(
        "NVIDIA GeForce RTX 4080 SUPER", "00000000:01:00.0", None, None),
    "query-rtx2080s-591.86-windows-full.csv": CardFacts(RTX2080S, "00000000:0C:00.0", None, None),
    "query-rtx2080s-595.71.05-linux-full.csv": CardFacts(RTX2080S, "00000000:0C:00.0", None, None),
    "query-rtx2080s-610.57.04-linux-full.csv": CardFacts(RTX2080S, "00000000:0C:00.0", None, None),
    "query-rtx2080s-610.62-windows-full.csv": CardFacts(RTX2080S, "00000000:0C:00.0", None, None),
}
# Help texts: (switch spelling, lists remapped_rows.*). Every one lists the other candidates.
HELP: dict[str, tuple[str, bool]] = {
    "help-query-gpu-2021-windows-466.txt": ("--query-gpu=", False),
    "help-query-gpu-535.129.03.txt": ("--query-gpu", False),
    "help-query-gpu-590.48.01-linux.txt": ("--query-gpu", True),
    "help-query-gpu-591.86-windows.txt": ("--query-gpu", True),
    "help-query-gpu-595.71.05-linux.txt": ("--query-gpu", True),
    "help-query-gpu-610.57.04-linux.txt": ("--query-gpu", True),
    "help-query-gpu-610.62-windows.txt": ("--query-gpu", True),
}
NOT_APPLICABLE: dict[str, str] = {
    r"SOURCES\.md": "provenance notes, not tool output",
    r"help-h-.*\.txt": "nvidia-smi -h; the exporter probes --help-query-gpu only",
    r"help-query-retired-pages-.*\.txt": "retired pages come from --query-gpu counts",
    r"query-retired-pages-.*\.csv": "--query-retired-pages rows; counts come from --query-gpu",
}


def _source(env: dict[str, str]) -> NvidiaSource:
    return NvidiaSource(NVIDIA_SMI, ToolRunner(timeout_s=30, max_output_bytes=1 << 20, env=env))


def check_pair(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    help_path, csv_path = case.paths
    env = {**env, "FAKE_NVIDIA_HELP": str(help_path), "FAKE_NVIDIA_QUERY": str(csv_path)}
    report = matching_report(csv_path.name)  # -q of the same machine, where captured
    if report is not None:
        env["FAKE_NVIDIA_Q"] = str(NVIDIA_DIR / report)
    out = _source(env).collect(clock())
    facts, remap_listed = FULL_CSV[csv_path.name], HELP[help_path.name][1]
    (card,) = out.readings
    assert (card.vendor, card.gpu, card.uuid, card.model, card.pci_bus_id) == (
        "nvidia", 0, H100_UUID, facts.model, facts.bus)
    remap = facts.remap if remap_listed else None
    expected: dict[CounterKey, int | None] = {
        "ecc_uncorrected_total": facts.ecc, "ecc_corrected_total": facts.ecc,
        "retired_pages": None,  # [N/A] on every captured card (Turing to Hopper)
        "remapped_rows_pending": remap, "remapped_rows_failure": remap}
    assert dict(card.counters) == expected
    assert out.anomalies == () and out.failures == ()
    if report is not None:
        assert (card.pcie_replays, card.pcie_replay_rollovers) == (Q_REPORTS[report][1][0], 0)
    query = next(argv for argv in invocations(Path(env["FAKE_NVIDIA_LOG"]))
                 if argv[0].startswith("--query-gpu="))[0]
    assert ("remapped_rows" in query) == remap_listed


def check_help(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    fields = nvidia.parse_help(path.read_text())
    switch, remap_listed = HELP[path.name]
    assert fields.switch == switch
    supported = {f for f in nvidia.HEALTH_FIELDS if fields.supports(f)}
    remap = {nvidia.REMAP_PENDING, nvidia.REMAP_FAILURE}
    assert supported == (set(nvidia.HEALTH_FIELDS) if remap_listed else
                         set(nvidia.HEALTH_FIELDS) - remap)
    assert {"index", "uuid", "name", "pci.bus_id", "gpu_name", "gpu_uuid"} <= fields.names


def _collect_error(env: dict[str, str], capture: Path, status: int, clock: FakeClock) -> str:
    env = {**env, "FAKE_NVIDIA_MODE": "replay", "FAKE_NVIDIA_REPLAY": str(capture),
           "FAKE_NVIDIA_REPLAY_EXIT": str(status)}
    source = _source(env)
    with pytest.raises(CollectError) as info:
        source.collect(clock())
    assert info.value.reason == "exit_code"
    assert next(iter(source.extra_metrics())).samples  # the probe still ran and is reported
    return str(info.value)


def check_invalid_field(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    # The fake prints exactly what the real tool printed for the same request...
    fake = subprocess.run(
        [NVIDIA_SMI, "--query-gpu=device_minor,gpu_uuid,pci.bus_id",
         "--format=csv,noheader,nounits"],
        env={**env, "FAKE_NVIDIA_HELP": str(NVIDIA_DIR / "help-query-gpu-590.48.01-linux.txt")},
        capture_output=True, text=True, check=False, timeout=30)
    assert (fake.returncode, fake.stdout) == (2, path.read_text())
    # ...and the exporter turns the real answer into an exit_code error naming the field.
    assert "device_minor" in _collect_error(env, path, 2, clock)


def check_nvml_mismatch(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    assert "status 18" in _collect_error(env, path, 18, clock)


def check_titanx(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    columns = ("index", "uuid", "name", "temperature.gpu", "utilization.gpu", "memory.used",
               "memory.total")  # the query that produced this capture
    out = nvidia.parse_query(path.read_text(), columns)
    assert [r.gpu for r in out.readings] == list(range(8))
    assert all(re.fullmatch(r"GPU-[0-9a-f-]{36}", r.uuid or "") for r in out.readings)
    assert {r.model for r in out.readings} == {"GeForce GTX TITAN X"}
    assert all(set(r.counters.values()) == {None} for r in out.readings)


def check_unknown_error_cell(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    rows = [line for line in path.read_text().splitlines()[1:] if line.strip()]  # blank line
    cells = [c.strip() for c in rows[0].split(",")]
    assert cells[-1] == "[Unknown Error]" and is_declared_unknown(cells[-1])
    reader = CellReader()
    assert reader.count(cells[-1], "power.default_limit") is None and not reader.anomalies


def check_volatile_ecc_rows(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    # Volatile (since driver load) counters: not the contract's aggregate totals, but the
    # cells are plain integers on a 2-card Blackwell node, as the parser expects.
    reader = CellReader()
    rows = [line.split(", ") for line in path.read_text().splitlines()[1:]]
    assert [[reader.count(c, "ecc") for c in row[-2:]] for row in rows] == [[0, 0], [0, 0]]


def check_alias_header(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    asked = ["index", "name"] + [f"clocks_throttle_reasons.{r}" for r in (
        "active", "gpu_idle", "hw_thermal_slowdown", "sw_thermal_slowdown", "sw_power_cap")]
    fake = subprocess.run(
        [NVIDIA_SMI, "--query-gpu=" + ",".join(asked), "--format=csv"],
        env={**env, "FAKE_NVIDIA_HELP": str(NVIDIA_DIR / "help-query-gpu-590.48.01-linux.txt"),
             "FAKE_NVIDIA_QUERY": str(NVIDIA_DIR / "query-h100-590.48.01-full.csv")},
        capture_output=True, text=True, check=True, timeout=30)
    # Like the real tool, the header names the current field, not the alias asked for; this
    # is why the exporter maps columns by position and asks for no header.
    assert fake.stdout.splitlines()[0] == path.read_text().splitlines()[0]


# Parsers that must refuse a not-applicable capture of their vendor (the reader never mistakes
# a different command's output for its own).
REJECTERS: dict[str, tuple[Callable[[str], object], ...]] = {
    "kunlun-": (kunlunxin.parse_table, kunlunxin_xml.parse_xml),
    "ascend-": (ascend.parse_table,),
    "iluvatar-": (iluvatar.parse_xml,),
    "enflame-": (enflame.parse_query,),
    "hygon-": (hygon.parse_table,),
}


def check_not_applicable(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    assert case.reason and path.stat().st_size > 0
    text = path.read_text(errors="replace")
    # Nothing the exporter parses would take this file for its own input.
    with pytest.raises(ParseError):
        nvidia.parse_help(text)
    for prefix, parsers in REJECTERS.items():
        for parse in parsers if path.name.startswith(prefix) else ():
            with pytest.raises(ParseError):
                parse(text)


def unclassified(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    pytest.fail(f"capture {case.paths[0].name} is not classified: add its expected values to "
                "the conformance checks or list it in NOT_APPLICABLE with the reason")


def shared_missing(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    require_shared()


SINGLE: dict[str, tuple[Check, str]] = {
    "stdout-invalid-field-exit2.txt": (check_invalid_field, ""),
    "stdout-nvml-mismatch-exit18.txt": (check_nvml_mismatch, ""),
    "query-titanx8-noheader-nounits.csv": (check_titanx, ""),
    "query-rtx2080ti-442.19-nounits-unknown-error.csv": (check_unknown_error_cell, ""),
    "query-rtxpro6000-570.172.08-ecc.csv": (check_volatile_ecc_rows, ""),
    "query-rtxpro6000-570.172.08-alias-header.csv": (check_alias_header, ""),
    **{name: (check, "") for name, check in LOG_CHECKS.items()},
    **{name: (check, "") for name, check in Q_CHECKS.items()},
    **vendors.CHECKS,
}
NOT_APPLICABLE.update(vendors.NOT_APPLICABLE)


def _param(name: str, path: Path) -> object:
    reason = next((r for pattern, r in NOT_APPLICABLE.items() if re.fullmatch(pattern, name)),
                  None)
    if name in SINGLE:
        check, why = SINGLE[name]
        label = f"{name}-deliberately-unsupported: {why}" if why else name
        return pytest.param(Case(check, (path,), why), id=label)
    if reason is not None:
        return pytest.param(Case(check_not_applicable, (path,), reason),
                            id=f"{name}-not-applicable: {reason}")
    return pytest.param(Case(unclassified, (path,)), id=f"{name}-unclassified")


def _cases() -> list[object]:
    if not shared_available():
        return [pytest.param(Case(shared_missing, ()), id="shared-captures-absent")]
    files = sorted(NVIDIA_DIR.iterdir()) + sorted(VENDORS_DIR.iterdir())
    params: list[object] = []
    for path in files:
        name = path.name
        if name in HELP:
            params.append(pytest.param(Case(check_help, (path,)), id=f"{name}-fields"))
            params += [pytest.param(Case(check_pair, (path, NVIDIA_DIR / csv)),
                                    id=f"{name}+{csv}") for csv in sorted(FULL_CSV)]
        elif name not in FULL_CSV:  # a full CSV is covered by every help text above
            params.append(_param(name, path))
    missing = (set(FULL_CSV) | set(SINGLE)) - {p.name for p in files}
    params += [pytest.param(Case(unclassified, (Path(m),)), id=f"{m}-missing")
               for m in sorted(missing)]
    return params


@pytest.mark.parametrize("case", _cases())
def test_capture(case: Case, tool_env: dict[str, str], clock: FakeClock) -> None:
    case.check(case, tool_env, clock)
