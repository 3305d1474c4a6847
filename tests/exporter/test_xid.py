"""NVIDIA Xid lines: the pure line parser, and the follower reading /dev/kmsg (a file or FIFO
here), dmesg or journalctl (fake executables) into per-card counters, never twice."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from prometheus_client.registry import CollectorRegistry

from gpu_health.exporter.main import Exporter
from gpu_health.exporter.parsers import xid
from gpu_health.exporter.parsers.cells import pci_key
from gpu_health.exporter.tool_output import CardReading
from gpu_health.exporter.xid_follower import XidFollower, _Cursor
from gpu_health.exporter.xid_store import XID_METRIC, XidCollector, XidStore
from gpu_health.runner import ToolRunner
from tests.shared import FIXTURES

from .conftest import MakeExporter
from .support import DMESG, JOURNALCTL, Scrape, scrape

UUID = "GPU-00000000-0000-0000-0000-00000000000{}"
KMSG_LINES = (FIXTURES / "kmsg-xid-variants.txt").read_text()
# kmsg-xid-variants.txt and dmesg-xid-variants.log name card 0 at 0000:00:09 and card 1 at
# 0000:02:00 (as the fake nvidia-smi's state file places them) and one unknown card at 5e:00.
EXPECTED = {("0", "13"): 1, ("0", "48"): 1, ("0", "94"): 1,
            ("1", "63"): 1, ("1", "13"): 1, ("1", "79"): 1}


@pytest.mark.parametrize(("line", "pci", "number"), [
    ("NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics", "0000:38:00", 13),
    ("NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout", "0000:9b:00", 119),
    ("NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", "0000:01:00", 79),
    ("NVRM: Xid (0000:01:00): 31, Ch 00000004", "0000:01:00", 31),
    ("NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained", "0000:01:00", 94),
    ("NVRM: Xid (PCI:0000:3B:00 GPU-I:01 GPU-CI:02): 13, pid=9", "0000:3b:00", 13),
], ids=["pid-unknown", "pid", "no-pid", "no-PCI-prefix", "mig", "mig-compute-instance"])
def test_every_xid_line_form(line: str, pci: str, number: int) -> None:
    for prefix in ("", "[ 1843.308145] ", "4,2101,1843308145,-;", "[Sun Feb 23 16:24:18 2025] "):
        event = xid.parse_line(prefix + line)
        assert event is not None and (event.pci_bus_id, event.xid) == (pci, number)
        assert event.uptime_s == (1843.308145 if prefix[:2] in ("[ ", "4,") else None)


@pytest.mark.parametrize("line", [
    "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up",
    "NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.",
    "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
    "NVRM: Rate limiting GSP RPC error prints for GPU at PCI:0000:9b:00 (printing 1 of every 30)",
    "usb 1-1: new high-speed USB device number 2 using xhci_hcd",
])
def test_lines_that_are_not_gpu_xids(line: str) -> None:
    assert xid.parse_line(line) is None


def test_pci_ids_from_the_kernel_and_nvidia_smi_are_one_key() -> None:
    assert pci_key("0000:9b:00") == pci_key("00000000:9B:00.0") == "0000:9b:00"
    assert pci_key("GPU-0") is None


def _two_cards(tmp_path: Path, tool_env: dict[str, str]) -> None:
    state = tmp_path / "state.json"
    state.write_text('{"cards": {"0": {}, "1": {}}}')  # card 1 at 00000000:02:00.0
    tool_env["FAKE_NVIDIA_STATE"] = str(state)


def xid_counts(metrics: Scrape) -> dict[tuple[str, str], float | None]:
    return {(s["gpu"], s["xid"]): metrics.get(XID_METRIC, **s)
            for s in metrics.series(XID_METRIC)}


def nonzero(metrics: Scrape) -> dict[tuple[str, str], float | None]:
    return {key: value for key, value in xid_counts(metrics).items() if value}


def _exporter(make_exporter: MakeExporter, kmsg: Path) -> Exporter:
    exporter = make_exporter(kmsg_path=str(kmsg))
    exporter.loop.tick()
    assert exporter.xid is not None
    exporter.xid.poll_once()  # opens the log at its end
    return exporter


def test_kmsg_lines_are_counted_per_card_and_a_restart_does_not_count_them_again(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path
) -> None:
    _two_cards(tmp_path, tool_env)
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(KMSG_LINES)  # logged before the exporter started: never counted
    exporter = _exporter(make_exporter, kmsg)
    metrics = scrape(exporter.registry)
    assert nonzero(metrics) == {}
    assert xid_counts(metrics)[("1", "48")] == 0  # log readable, none seen: a real zero
    with kmsg.open("a") as fh:
        fh.write(KMSG_LINES)
    assert exporter.xid is not None
    exporter.xid.poll_once()
    metrics = scrape(exporter.registry)
    assert nonzero(metrics) == EXPECTED
    assert metrics.get(XID_METRIC, gpu="1", uuid=UUID.format(1), vendor="nvidia", xid="79") == 1
    assert metrics.get("gpu_health_exporter_xid_lines_unmatched_total") == 1  # 0000:5e:00
    assert metrics.get("gpu_health_exporter_xid_log_readable", source="kmsg") == 1
    restarted = _exporter(make_exporter, kmsg)
    assert nonzero(scrape(restarted.registry)) == {}


def test_kmsg_as_a_fifo(make_exporter: MakeExporter, tool_env: dict[str, str],
                        tmp_path: Path) -> None:
    _two_cards(tmp_path, tool_env)
    fifo = tmp_path / "kmsg-fifo"
    os.mkfifo(fifo)
    exporter = _exporter(make_exporter, fifo)  # no writer yet: nothing to read, still readable
    with fifo.open("w") as writer:
        writer.write(KMSG_LINES)
    assert exporter.xid is not None
    exporter.xid.poll_once()
    assert nonzero(scrape(exporter.registry)) == EXPECTED


def test_lines_read_before_the_first_nvidia_tick_wait_for_the_card_map(
    make_exporter: MakeExporter, tool_env: dict[str, str], tmp_path: Path
) -> None:
    _two_cards(tmp_path, tool_env)
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    exporter = make_exporter(kmsg_path=str(kmsg))
    assert exporter.xid is not None
    exporter.xid.poll_once()
    with kmsg.open("a") as fh:
        fh.write(KMSG_LINES)
    exporter.xid.poll_once()  # the exporter has not ticked yet: no card to map them to
    assert scrape(exporter.registry).get("gpu_health_exporter_xid_lines_unmatched_total") == 0
    exporter.loop.tick()
    exporter.xid.poll_once()
    assert nonzero(scrape(exporter.registry)) == EXPECTED


def _cards() -> list[CardReading]:
    return [CardReading(vendor="nvidia", gpu=i, uuid=UUID.format(i), model="H100",
                        pci_bus_id=bus) for i, bus in enumerate(("00000000:00:09.0",
                                                                 "00000000:02:00.0"))]


NEW_DMESG = (FIXTURES / "dmesg-xid-variants.log").read_text().replace("[ 1100.", "[ 1300.")


def _follower(env: dict[str, str], tmp_path: Path) -> tuple[XidFollower, Path, Path]:
    """A follower whose kmsg is unreadable; dmesg and journalctl print copies of the fixtures
    (their history: the first poll only sets the cursor)."""
    dmesg_log, journal_log = tmp_path / "dmesg.log", tmp_path / "journal.log"
    shutil.copy(FIXTURES / "dmesg-xid-variants.log", dmesg_log)
    shutil.copy(FIXTURES / "journalctl-k-short-monotonic-xid.log", journal_log)
    runner = ToolRunner(timeout_s=10, max_output_bytes=1 << 20, env={
        **env, "FAKE_DMESG_LOG": str(dmesg_log), "FAKE_JOURNALCTL_LOG": str(journal_log)})
    follower = XidFollower(XidStore(), runner, _cards, kmsg_path=str(tmp_path / "no-kmsg"),
                           dmesg=DMESG, journalctl=JOURNALCTL, interval_s=60)
    follower.poll_once()
    return follower, dmesg_log, journal_log


def _scrape(follower: XidFollower) -> Scrape:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(XidCollector(follower.store))
    return scrape(registry)


def _append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def test_unreadable_kmsg_falls_back_to_dmesg_and_counts_each_line_once(
    tool_env: dict[str, str], tmp_path: Path
) -> None:
    follower, dmesg_log, _ = _follower(tool_env, tmp_path)
    metrics = _scrape(follower)
    assert nonzero(metrics) == {}  # everything dmesg printed at the first poll is history
    assert metrics.get("gpu_health_exporter_xid_log_readable", source="kmsg") == 0
    assert metrics.get("gpu_health_exporter_xid_log_readable", source="dmesg") == 1
    assert metrics.get("gpu_health_exporter_xid_log_readable", source="journalctl") is None
    _append(dmesg_log, NEW_DMESG)
    follower.poll_once()
    follower.poll_once()  # the same history printed again: nothing counted twice
    assert nonzero(_scrape(follower)) == EXPECTED
    _append(dmesg_log, "[ 1400.5] NVRM: Xid (PCI:0000:00:09): 48, pid='<unknown>', name=x, DBE\n")
    follower.poll_once()
    assert nonzero(_scrape(follower)) == {**EXPECTED, ("0", "48"): 2}


def test_failing_dmesg_falls_back_to_journalctl(tool_env: dict[str, str], tmp_path: Path) -> None:
    follower, _, journal_log = _follower({**tool_env, "FAKE_DMESG_MODE": "exit:1"}, tmp_path)
    _append(journal_log, NEW_DMESG.replace("] NVRM", "] node-7 kernel: NVRM"))
    follower.poll_once()
    metrics = _scrape(follower)
    assert nonzero(metrics) == EXPECTED
    readable = {s["source"]: metrics.get("gpu_health_exporter_xid_log_readable", **s)
                for s in metrics.series("gpu_health_exporter_xid_log_readable")}
    assert readable == {"kmsg": 0, "dmesg": 0, "journalctl": 1}
    errors = "gpu_health_exporter_xid_follow_errors_total"
    # Counted once each when they stopped being readable, not on every poll.
    assert (metrics.get(errors, reason="read"), metrics.get(errors, reason="exit_code")) == (1, 1)


def test_no_readable_source_exports_no_xid_counter(tool_env: dict[str, str],
                                                   tmp_path: Path) -> None:
    env = {**tool_env, "FAKE_DMESG_MODE": "exit:1", "FAKE_JOURNALCTL_MODE": "exit:1"}
    metrics = _scrape(_follower(env, tmp_path)[0])
    assert metrics.series(XID_METRIC) == []  # unknown, not 0
    assert len(metrics.series("gpu_health_exporter_xid_log_readable")) == 3


def test_cursor_first_read_is_history_then_lines_sharing_a_stamp_count_once() -> None:
    cursor = _Cursor()
    assert cursor.take_new(["[    4.000000] old", "[    5.000000] a"]) == []
    first = ["[    5.000000] a", "[    5.000000] b", "[    4.9] old", "no stamp"]
    assert cursor.take_new(first) == ["[    5.000000] b"]
    again = [*first[:2], "[    5.000000] c", "[    6.0] d"]
    assert cursor.take_new(again) == ["[    5.000000] c", "[    6.0] d"]
    assert cursor.take_new(again) == []
    empty = _Cursor()
    assert empty.take_new([]) == [] and empty.take_new(["[ 0.5] first"]) == ["[ 0.5] first"]


def test_a_failing_poll_is_counted_and_the_next_one_works(
    tool_env: dict[str, str], tmp_path: Path
) -> None:
    calls: list[int] = []

    def cards() -> list[CardReading]:
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("a bug in the card map")
        return _cards()

    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    store = XidStore()
    follower = XidFollower(store, ToolRunner(timeout_s=10, max_output_bytes=1 << 20,
                                             env=tool_env), cards, kmsg_path=str(kmsg),
                           dmesg="", journalctl="", interval_s=60)
    follower.poll_once()
    assert store.snapshot().errors["internal"] == 1
    follower.poll_once()  # this one works: it opens the log
    _append(kmsg, KMSG_LINES)
    follower.poll_once()
    assert sum(store.snapshot().counts.values()) == len(EXPECTED)


def test_the_follower_thread_polls_until_stopped(tool_env: dict[str, str],
                                                 tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    store = XidStore()
    follower = XidFollower(store, ToolRunner(timeout_s=10, max_output_bytes=1 << 20,
                                             env=tool_env), _cards, kmsg_path=str(kmsg),
                           dmesg="", journalctl="", interval_s=0.05)
    follower.start()
    try:
        deadline = time.monotonic() + 20
        while not store.snapshot().readable and time.monotonic() < deadline:
            time.sleep(0.01)  # waiting for the thread's first poll, not for time to pass
        with kmsg.open("a") as fh:
            fh.write(KMSG_LINES)
        while sum(store.snapshot().counts.values()) < len(EXPECTED) and (
                time.monotonic() < deadline):
            time.sleep(0.01)
    finally:
        follower.stop(timeout_s=10)
    assert sum(store.snapshot().counts.values()) == len(EXPECTED)


def test_a_file_growing_without_bound_is_read_in_bounded_polls_and_a_huge_line_is_dropped(
    tool_env: dict[str, str], tmp_path: Path
) -> None:
    """Before: 512 MB appended to the followed file (invalid UTF-8, one 300 MB line without a
    newline) took the exporter to 1.95 GB. Each poll now reads at most MAX_BYTES_PER_POLL, an
    over-long line is dropped (counted once), and the Xid lines after it still count."""
    from gpu_health.exporter.xid_follower import MAX_BYTES_PER_POLL, MAX_LINE

    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    store = XidStore()
    follower = XidFollower(store, ToolRunner(timeout_s=10, max_output_bytes=1 << 20,
                                             env=tool_env), _cards, kmsg_path=str(kmsg),
                           dmesg="", journalctl="", interval_s=60)
    follower.poll_once()  # opens the file at its end
    _append_bytes(kmsg, b"\xff\xfe" * (3 * MAX_BYTES_PER_POLL // 2))  # 24 MiB, no newline
    _append_bytes(kmsg, b"\n" + KMSG_LINES.encode())
    polls = 0
    while sum(store.snapshot().counts.values()) < len(EXPECTED):
        follower.poll_once()
        polls += 1
        assert len(follower._partial) <= MAX_LINE  # never the huge line in memory
        assert polls < 10
    assert polls == 4  # 8 MiB per poll: three polls of the long line, one for the rest
    assert store.snapshot().errors["line_too_long"] == 1
    assert sum(store.snapshot().counts.values()) == len(EXPECTED)


def test_smaller_configured_bounds_read_less_per_poll_and_drop_shorter_lines(
    tool_env: dict[str, str], tmp_path: Path
) -> None:
    """--xid-max-bytes-per-poll and --xid-max-line-bytes are what the follower applies."""
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    store = XidStore()
    follower = XidFollower(store, ToolRunner(timeout_s=10, max_output_bytes=1 << 20,
                                             env=tool_env), _cards, kmsg_path=str(kmsg),
                           dmesg="", journalctl="", interval_s=60,
                           max_bytes_per_poll=256 << 10, max_line_bytes=2048)
    follower.poll_once()
    _append_bytes(kmsg, b"x" * 4096 + b"\n")  # over the 2 KiB cap, under the default 64 KiB
    _append_bytes(kmsg, b"y" * (600 << 10) + b"\n" + KMSG_LINES.encode())
    polls = 0
    while sum(store.snapshot().counts.values()) < len(EXPECTED):
        follower.poll_once()
        polls += 1
        assert len(follower._partial) <= 2048
        assert polls < 10
    assert polls == 3  # 256 KiB per poll over ~604 KiB
    assert store.snapshot().errors["line_too_long"] == 2


def _append_bytes(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)
