"""The bare-metal units (deploy/systemd) checked by the real ``systemd-analyze``: ``verify``
(every directive parses, the command exists) and ``security --offline`` (the exposure systemd
itself scores), and the promises docs/deploy.md makes: a dedicated user, no new privileges, a
read-only system, write access only to the store, and the exporter's one capability.

Debian's ``systemd`` package has systemd-analyze (``.ci/run`` installs it where missing); a
missing one fails, never skips. ExecStart is pointed at this venv's console scripts, because
verify checks that the command exists; the units install ``/opt/gpu-health/bin/...``.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import REPO

UNITS = REPO / "deploy" / "systemd"
NAMES = ("gpu-health-exporter.service", "gpu-health-evaluator.service")
EXPOSURE_AT_MOST = 45  # systemd's scale x10: 4.5 and below reads "OK"


def _analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.fail("systemd-analyze is not installed: Debian's systemd package has it (.ci/run)")
    return found


def _local_copies(tmp_path: Path) -> list[Path]:
    venv = Path(sys.executable).parent
    copies = []
    for name in NAMES:
        text = (UNITS / name).read_text()
        assert "ExecStart=/opt/gpu-health/bin/" in text
        copies.append(tmp_path / name)
        copies[-1].write_text(text.replace("/opt/gpu-health/bin/", f"{venv}/"))
    return copies


def _unit(name: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNITS / name)
    return parser


def test_systemd_analyze_verify_says_nothing(tmp_path: Path) -> None:
    result = subprocess.run([_analyze(), "verify", *map(str, _local_copies(tmp_path))],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stderr


@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_systemd_scores_the_exposure_ok(index: int, tmp_path: Path) -> None:
    unit = _local_copies(tmp_path)[index]
    result = subprocess.run([_analyze(), "security", "--offline=true",
                             f"--threshold={EXPOSURE_AT_MOST}", str(unit)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr


def test_a_broken_unit_is_caught(tmp_path: Path) -> None:
    """The check above is not blind: an unknown key is reported."""
    unit = _local_copies(tmp_path)[0]
    unit.write_text(unit.read_text().replace("NoNewPrivileges=yes", "NoNewPrivilege=yes"))
    result = subprocess.run([_analyze(), "verify", str(unit)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert "Unknown key" in result.stderr


@pytest.mark.parametrize("name", NAMES)
def test_a_dedicated_user_no_new_privileges_and_a_read_only_system(name: str) -> None:
    service = _unit(name)["Service"]
    assert (service["User"], service["Group"]) == ("gpu-health", "gpu-health")
    assert service["NoNewPrivileges"] == "yes" and service["ProtectSystem"] == "strict"
    assert service["ProtectHome"] == "yes" and service["PrivateTmp"] == "yes"
    assert "ReadWritePaths" not in service  # nothing writable beyond what is stated below


def test_the_evaluator_writes_only_its_store_and_has_no_capability() -> None:
    service = _unit("gpu-health-evaluator.service")["Service"]
    assert service["StateDirectory"] == "gpu-health"  # /var/lib/gpu-health, the only rw path
    assert service["WorkingDirectory"] == "/var/lib/gpu-health"
    assert service["CapabilityBoundingSet"] == "" and service["AmbientCapabilities"] == ""
    assert service["PrivateDevices"] == "yes" and service["ProtectKernelLogs"] == "yes"
    assert service["ExecStart"].endswith("run --config /etc/gpu-health/evaluator.yml")


def test_the_exporter_s_one_capability_is_reading_the_kernel_log() -> None:
    service = _unit("gpu-health-exporter.service")["Service"]
    assert service["CapabilityBoundingSet"] == service["AmbientCapabilities"] == "CAP_SYSLOG"
    assert "StateDirectory" not in service  # it writes nothing
    assert "ProtectKernelLogs" not in service and "PrivateDevices" not in service
    assert "--web.listen-address=:10346" in service["ExecStart"]


def test_the_bare_metal_walk_through_names_these_units() -> None:
    deploy = (REPO / "docs" / "deploy.md").read_text()
    for needed in (*NAMES, "/opt/gpu-health", "HealthCheckProgram", "job_name",
                   "useradd", "systemctl enable --now"):
        assert needed in deploy, needed
