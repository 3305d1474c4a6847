"""The ``gpu-health-exporter`` command: --once, --textfile, bad arguments, serving, SIGTERM.

Run as a real process (``python -m gpu_health.exporter.main``) against the fake tools, and the
exposition is checked with the real ``promtool check metrics``.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from gpu_health.contract import INFO_METRIC, METRIC_NAMES, VENDORS
from tests.promtool import promtool
from tests.shared import REPO

from .support import (
    CNMON,
    EFSMI,
    HY_SMI,
    IXSMI,
    MTHREADS_GMI,
    MX_SMI,
    NPU_SMI,
    NVIDIA_SMI,
    XPU_SMI,
    Scrape,
)

NO_KERNEL_LOG = ["--kmsg-path", "", "--dmesg", "", "--journalctl", ""]  # not the test host's


def exporter(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpu_health.exporter.main", *args],
        cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = exporter(args, env)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), "check", "metrics"], input=text, text=True,
                          capture_output=True, timeout=60, check=False)


def test_once_prints_the_five_metrics_for_the_replayed_card_and_passes_promtool(
    tool_env: dict[str, str]
) -> None:
    # The README demo, relative path and all.
    result = run(["--once", "--nvidia-smi", "tests/fakebin/nvidia-smi"], tool_env)
    assert result.returncode == 0, result.stderr
    for name in (INFO_METRIC, *METRIC_NAMES.values()):
        assert f"# TYPE {name} " in result.stdout
    metrics = Scrape(result.stdout)
    card = {"gpu": "0", "uuid": "GPU-00000000-0000-0000-0000-000000000000", "vendor": "nvidia"}
    assert metrics.get("gpu_health_ecc_uncorrected_total", **card) == 0
    assert metrics.get("gpu_health_remapped_rows_failure", **card) == 0
    assert metrics.get("gpu_health_retired_pages", **card) is None  # H100 reports [N/A]
    checked = promtool_check(result.stdout)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_node_name_is_exported_when_given_and_passes_promtool(
    tool_env: dict[str, str]
) -> None:
    result = run(["--once", "--nvidia-smi", NVIDIA_SMI], {**tool_env, "NODE_NAME": "gpu-07"})
    assert result.returncode == 0, result.stderr
    assert Scrape(result.stdout).get("gpu_health_node_info", node="gpu-07") == 1
    assert promtool_check(result.stdout).returncode == 0
    bare = run(["--once", "--nvidia-smi", NVIDIA_SMI], tool_env)
    assert "gpu_health_node_info" not in bare.stdout  # not told: absent, never a guess


def test_once_with_every_vendor_and_a_failing_one_exits_zero_and_passes_promtool(
    tool_env: dict[str, str]
) -> None:
    env = {**tool_env, "FAKE_NVIDIA_MODE": "exit18", "FAKE_XPU_MODE": "garbage"}
    result = run(["--once", "--nvidia-smi", NVIDIA_SMI, "--xpu-smi", XPU_SMI,
                  "--cnmon", CNMON, "--log.level", "error"], env)
    assert result.returncode == 0
    metrics = Scrape(result.stdout)
    assert metrics.get("gpu_health_exporter_collect_errors_total", vendor="nvidia",
                       reason="exit_code") == 1
    assert metrics.get("gpu_health_exporter_collect_errors_total", vendor="kunlunxin",
                       reason="parse") == 1
    assert metrics.get("gpu_health_ecc_uncorrected_total", gpu="1", uuid="",
                       vendor="cambricon") == 0
    checked = promtool_check(result.stdout)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_bad_arguments_exit_2_listing_every_problem(tool_env: dict[str, str]) -> None:
    result = run(["--once", "--collect-interval", "0", "--stale-after", "10s",
                  "--tool-timeout", "soon", "--max-output-bytes", "-5",
                  "--web.listen-address", "10346", "--textfile", "/no/such/dir/x.txt",
                  "--log.level", "chatty", "--frobnicate"], tool_env)
    assert result.returncode == 2 and result.stdout == ""
    for fragment in ("'--frobnicate'", "--collect-interval", "--tool-timeout",
                     "--max-output-bytes", "--web.listen-address", "must end in .prom",
                     "does not exist", "--log.level"):
        assert fragment in result.stderr, fragment
    assert "8 problem(s)" in result.stderr


def test_once_textfile_is_written_atomically(tool_env: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "gpu_health.prom"
    result = run(["--once", "--nvidia-smi", NVIDIA_SMI, "--textfile", str(target)], tool_env)
    assert result.returncode == 0 and result.stdout == ""
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".prom" or ".prom." in p.name] == [
        "gpu_health.prom"]  # no temporary file left behind
    assert Scrape(target.read_text()).get("gpu_health_remapped_rows_pending", gpu="0",
                                          uuid="GPU-00000000-0000-0000-0000-000000000000",
                                          vendor="nvidia") == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serves_metrics_writes_textfile_and_stops_on_sigterm(
    tool_env: dict[str, str], tmp_path: Path
) -> None:
    port = _free_port()
    textfile = tmp_path / "gpu.prom"
    proc = exporter(["--web.listen-address", f"127.0.0.1:{port}", "--nvidia-smi", NVIDIA_SMI,
                     "--textfile", str(textfile), *NO_KERNEL_LOG], tool_env)
    try:
        body = ""
        deadline = time.monotonic() + 30
        while INFO_METRIC + "{" not in body and time.monotonic() < deadline:
            try:  # waiting for the server and its first tick, not for time to pass
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    body = r.read().decode()
            except OSError:
                pass
            time.sleep(0.05)
        assert INFO_METRIC + "{" in body
        # The process's own metrics, as every exporter has (never in the textfile below).
        assert "\nprocess_cpu_seconds_total " in body and "\npython_info{" in body
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            assert r.status == 200
        head = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", method="HEAD")
        with urllib.request.urlopen(head, timeout=5) as r:  # prometheus_client alone: 405
            assert r.status == 200 and r.read() == b""
            assert int(r.headers["Content-Length"]) > 1000
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        # The textfile is written after the tick that filled /metrics: wait for it too.
        while not (textfile.exists() and INFO_METRIC in textfile.read_text()) and (
                time.monotonic() < deadline):
            time.sleep(0.05)
        assert textfile.exists() and INFO_METRIC in textfile.read_text()
        assert "process_" not in textfile.read_text(), "node_exporter has its own process_*"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_a_port_in_use_exits_1(tool_env: dict[str, str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = run(["--web.listen-address", f"127.0.0.1:{port}", "--nvidia-smi", ""], tool_env)
    assert result.returncode == 1 and "cannot listen" in result.stderr


def test_once_with_every_vendor_added_in_issue_6_passes_promtool(
    tool_env: dict[str, str]
) -> None:
    flags = ["--npu-smi", NPU_SMI, "--mx-smi", MX_SMI, "--ixsmi", IXSMI, "--efsmi", EFSMI,
             "--hy-smi", HY_SMI, "--mthreads-gmi", MTHREADS_GMI, "--xpu-smi", XPU_SMI]
    result = run(["--once", "--nvidia-smi", "", "--cnmon", "", *flags], tool_env)
    assert result.returncode == 0, result.stderr
    metrics = Scrape(result.stdout)
    vendors = {s["vendor"] for s in metrics.series(INFO_METRIC)}
    assert vendors == {"kunlunxin", "ascend", "metax", "iluvatar", "enflame", "hygon",
                       "mthreads"}
    assert vendors <= set(VENDORS)
    assert metrics.series("gpu_health_xid_errors_total") == []  # --once follows no log
    checked = promtool_check(result.stdout)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_serving_follows_the_kernel_log_for_xid_lines(
    tool_env: dict[str, str], tmp_path: Path
) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    port = _free_port()
    proc = exporter(["--web.listen-address", f"127.0.0.1:{port}", "--nvidia-smi", NVIDIA_SMI,
                     "--kmsg-path", str(kmsg), "--xid-interval", "100ms"], tool_env)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        body = _wait_for(url, 'gpu_health_exporter_xid_log_readable{source="kmsg"} 1.0')
        with kmsg.open("a") as fh:
            fh.write("4,1,99000000000,-;NVRM: Xid (PCI:0000:00:09): 48, pid='<unknown>', "
                     "name=<unknown>, An uncorrectable double bit error (DBE)\n")
        body = _wait_for(url, 'xid="48"} 1.0')
        card = {"gpu": "0", "uuid": "GPU-00000000-0000-0000-0000-000000000000",
                "vendor": "nvidia"}
        metrics = Scrape(body)
        assert metrics.get("gpu_health_xid_errors_total", **card, xid="48") == 1
        assert metrics.get("gpu_health_xid_errors_total", **card, xid="94") == 0
        checked = promtool_check(body)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _wait_for(url: str, fragment: str) -> str:
    body = ""
    deadline = time.monotonic() + 30
    while fragment not in body and time.monotonic() < deadline:
        try:  # waiting for the server and its threads, not for time to pass
            with urllib.request.urlopen(url, timeout=5) as response:
                body = response.read().decode()
        except OSError:
            pass
        if fragment not in body:
            time.sleep(0.05)
    assert fragment in body, body
    return body
