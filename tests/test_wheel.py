"""The wheel as users install it: built from a copy of the checkout, installed into a fresh
virtual environment, and run from an empty folder, where nothing of the checkout can help.

Steps: build the wheel (``pip wheel``, the project's own build backend), create a venv with the
base interpreter, ``pip install`` the wheel (its dependencies from the configured indexes), then
from an empty temporary folder: ``gpu-health-exporter --once`` with the packaged fake tool,
``gpu-health-evaluator run`` with no config until ``/readyz`` answers 200 against a real exporter
process on the default ports, and ``demo`` until its banner and first prediction. The top-level
``evaluator`` and ``exporter`` import names must not exist there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.shared import REPO

EXPORTER_PORT, EVALUATOR_PORT = 10346, 10347
# The checkout's own clutter: at the top (the store, the venv, build output) and anywhere.
TOP_CLUTTER = {".git", ".venv", "data", "build", "dist", ".test-artifacts"}
CLUTTER = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*_cache")


def _not_copied(folder: str, names: list[str]) -> set[str]:
    top = TOP_CLUTTER if Path(folder) == REPO else set()
    return set(CLUTTER(folder, names)) | (top & set(names))


@dataclass(frozen=True)
class Installed:
    wheel: Path
    bin: Path
    cwd: Path  # empty when each test starts using it
    env: dict[str, str]
    times: dict[str, float]


def _timed(times: dict[str, float], step: str, argv: list[str], **kw: object) -> str:
    started = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True, check=False,
                            timeout=600, **kw)  # type: ignore[call-overload]
    times[step] = round(time.monotonic() - started, 1)
    assert result.returncode == 0, f"{step}: {result.stdout}\n{result.stderr}"
    return str(result.stdout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=_not_copied)
    times: dict[str, float] = {}
    _timed(times, "build", [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(root / "dist"), str(source)])
    (wheel,) = (root / "dist").glob("gpu_health-*.whl")
    base = getattr(sys, "_base_executable", sys.executable)
    _timed(times, "venv", [base, "-m", "venv", str(root / "venv")])
    bin_ = root / "venv" / "bin"
    _timed(times, "install", [str(bin_ / "pip"), "install", "-q", str(wheel)])
    cwd = root / "empty"
    cwd.mkdir()
    # The venv first; the system's folders for the fake tools' "#!/usr/bin/env python3". No
    # PYTHONPATH: nothing of the checkout is importable.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{bin_}:/usr/local/bin:/usr/bin:/bin"
    yield Installed(wheel, bin_, cwd, env, times)
    print(f"\nwheel test steps (s): {times}")


def test_the_wheel_holds_one_import_package_and_everything_run_time_reads(
        installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"gpu_health"}
    for needed in ("gpu_health/evaluator/main.py", "gpu_health/exporter/main.py",
                   "gpu_health/data/rules/v2-ecc-xid.yaml",
                   "gpu_health/data/rules/v3-ecc-sustained.yaml",
                   "gpu_health/data/rules/actions/nvidia-memory-v2.yaml",
                   "gpu_health/data/rules/baselines/baseline-repeat.yaml",
                   "gpu_health/data/rules/prometheus/gpu-health.rules.yml",
                   "gpu_health/data/grafana/dashboards/gpu-health.json",
                   "gpu_health/data/fakebin/nvidia-smi", "gpu_health/data/fakebin/fakelib.py",
                   "gpu_health/evaluator/http/ui/static/index.html", "gpu_health/py.typed"):
        assert needed in names, needed
    # every capture a fake tool replays by default is in the wheel
    defaults = {m for f in (REPO / "tests" / "fakebin").iterdir() if f.is_file()
                for m in re.findall(r'"([\w.-]+\.(?:txt|csv|xml|log))"', f.read_text())}
    assert "nvidia-smi-query-gpu-h100-590.48.01.csv" in defaults
    assert sorted(d for d in defaults if f"gpu_health/data/fixtures/{d}" not in names) == []
    for rule in (REPO / "rules").rglob("*.y*ml"):
        assert f"gpu_health/data/rules/{rule.relative_to(REPO / 'rules').as_posix()}" in names


def _python(installed: Installed, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(installed.bin / "python"), "-c", code], cwd=installed.cwd,
                          env=installed.env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_only_gpu_health_is_importable(installed: Installed) -> None:
    for name in ("evaluator", "exporter"):
        result = _python(installed, f"import {name}")
        assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr
    assert _python(installed, "import gpu_health.evaluator.main, gpu_health.exporter.main") \
        .returncode == 0


def _fake_tool(installed: Installed) -> str:
    result = _python(installed, "from gpu_health import resources; "
                                "print(resources.FAKEBIN / 'nvidia-smi')")
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_exporter_reads_once_with_the_packaged_fake_tool(installed: Installed) -> None:
    out = _timed(installed.times, "exporter --once", [
        str(installed.bin / "gpu-health-exporter"), "--once", "--nvidia-smi",
        _fake_tool(installed), "--kmsg-path=", "--dmesg=", "--journalctl="],
        cwd=installed.cwd, env=installed.env)
    assert 'gpu_health_ecc_corrected_total{' in out and "gpu_health_gpu_info{" in out
    assert list(installed.cwd.iterdir()) == []


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except OSError:
        return 0, b""


def _until(check: object, what: str, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)  # polling a starting process, bounded by the deadline
    raise AssertionError(f"no {what} within {deadline_s:g}s")


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    return out


def test_run_with_no_config_gets_ready_against_a_real_exporter(installed: Installed) -> None:
    busy = [p for p in (EXPORTER_PORT, EVALUATOR_PORT) if not _port_free(p)]
    assert busy == [], f"the default ports {busy} are taken on this machine"
    folder = installed.cwd / "run"
    folder.mkdir()
    exporter = subprocess.Popen(
        [str(installed.bin / "gpu-health-exporter"), "--nvidia-smi", _fake_tool(installed),
         "--kmsg-path=", "--dmesg=", "--journalctl=", "--collect-interval=5s"],
        cwd=folder, env=installed.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    evaluator = subprocess.Popen([str(installed.bin / "gpu-health-evaluator"), "run"],
                                 cwd=folder, env=installed.env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
    started = time.monotonic()
    try:
        _until(lambda: _get(f"http://127.0.0.1:{EVALUATOR_PORT}/readyz")[0] == 200, "/readyz 200")
        installed.times["run to /readyz"] = round(time.monotonic() - started, 1)
        status, body = _get(f"http://127.0.0.1:{EVALUATOR_PORT}/targets")
        assert status == 200 and b'"up"' in body.replace(b" ", b""), body
    finally:
        log = _stop(evaluator)
        _stop(exporter)
    assert evaluator.returncode == 0, log
    assert (folder / "data" / "gpu-health.duckdb").is_file()  # the embedded default, here


def test_the_demo_runs_from_the_wheel_until_its_first_prediction(installed: Installed) -> None:
    folder = installed.cwd / "demo"
    folder.mkdir()
    started = time.monotonic()
    demo = subprocess.Popen(
        [str(installed.bin / "gpu-health-evaluator"), "demo", "--port", "0",
         "--exporter-port", "0", "--storage", "demo.duckdb"],
        cwd=folder, env=installed.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        assert demo.stdout is not None
        page = ""
        for line in demo.stdout:
            if line.startswith("  page "):
                page = line.split()[1]
                break
        assert page.endswith("/?source=simulated"), "no banner"
        installed.times["demo to banner"] = round(time.monotonic() - started, 1)
        api = page.removesuffix("/?source=simulated") + "/api/v1/gpu-health/predictions"

        def predicted() -> bool:
            status, body = _get(api + "?source=simulated")
            return status == 200 and bool(json.loads(body)["items"])

        _until(predicted, "prediction")
        installed.times["demo to first prediction"] = round(time.monotonic() - started, 1)
    finally:
        out = _stop(demo)
    assert demo.returncode == 0, out
    assert "stopping the demo" in out
