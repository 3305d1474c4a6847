"""Conformance for the kernel logs in ../shared/fixtures/nvidia/*.log: Xid lines counted per card.

Each log is appended to a file the follower reads as its kmsg path (after it opened it, as a
live kernel would write), with NVIDIA cards at the PCI ids the log names, written the way
nvidia-smi prints them (``00000000:9B:00.0``), so the id normalisation is exercised too.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.registry import CollectorRegistry

from gpu_health.exporter.tool_output import CardReading
from gpu_health.exporter.xid_follower import XidFollower
from gpu_health.exporter.xid_store import PRECREATED_XIDS, XID_METRIC, XidCollector, XidStore
from gpu_health.runner import ToolRunner

from .conformance_support import Case, Check
from .support import DMESG, FakeClock, Scrape, scrape

Cards = list[tuple[int, str, str]]  # (gpu, uuid, bus id as nvidia-smi prints it)
XID_LOGS: dict[str, tuple[Cards, dict[tuple[int, int], int]]] = {
    # Xid 13 floods with pid='<unknown>' and one Xid 43, dmesg --time-format iso.
    "dmesg-xid13-head20.log": (
        [(0, "GPU-00000000-0000-0000-0000-000000000038", "00000000:38:00.0")],
        {(0, 13): 19, (0, 43): 1}),
    # Xid 119 (GSP timeout) with pid=, dmesg -T; the log itself names GPU4's UUID.
    "dmesg-xid119-h100.log": (
        [(4, "GPU-509665ad-b600-ac93-3616-d754b23d636d", "00000000:9B:00.0")], {(4, 119): 5}),
    # Xid 79 plus NVSwitch SXid lines: the switch (at 0000:05:00.0, given a card here on
    # purpose) must get nothing.
    "kmsg-xid79-sxid20034.log": (
        [(0, "GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b", "00000000:91:00.0"),
         (1, "GPU-00000000-0000-0000-0000-000000000005", "00000000:05:00.0")], {(0, 79): 1}),
    # The 570 open-module "fallen off the bus" message has no Xid line at all.
    "dmesg-fallen-off-bus-no-xid-570.158.01.log": (
        [(0, "GPU-00000000-0000-0000-0000-0000000000b3", "00000000:B3:00.0")], {}),
}


def _readings(cards: Cards) -> list[CardReading]:
    return [CardReading(vendor="nvidia", gpu=gpu, uuid=uuid, model="", pci_bus_id=bus)
            for gpu, uuid, bus in cards]


def follow_kmsg_file(text: str, cards: Cards, workdir: Path, env: dict[str, str]) -> Scrape:
    """Append ``text`` to a kmsg-path file the follower already opened; scrape the counts."""
    kmsg = workdir / "kmsg"
    kmsg.write_text("an old line the follower must skip: NVRM: Xid (PCI:0000:38:00): 13, x\n")
    store = XidStore()
    follower = XidFollower(
        store, ToolRunner(timeout_s=30, max_output_bytes=1 << 20, env=env),
        lambda: _readings(cards), kmsg_path=str(kmsg), dmesg="", journalctl="", interval_s=60)
    try:
        follower.poll_once()  # opens at the end
        with kmsg.open("a") as fh:
            fh.write(text)
        follower.poll_once()
    finally:
        follower.stop()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(XidCollector(store))
    return scrape(registry)


def assert_counts(metrics: Scrape, cards: Cards, expected: dict[tuple[int, int], int]) -> None:
    series = {(int(s["gpu"]), int(s["xid"])): metrics.get(XID_METRIC, **s)
              for s in metrics.series(XID_METRIC)}
    wanted = {(gpu, xid): float(expected.get((gpu, xid), 0))
              for gpu, _, _ in cards for xid in {*PRECREATED_XIDS, *(x for g, x in expected
                                                                   if g == gpu)}}
    assert series == wanted
    assert metrics.get("gpu_health_exporter_xid_lines_unmatched_total") == 0
    assert {s["uuid"] for s in metrics.series(XID_METRIC)} == {uuid for _, uuid, _ in cards}


def check_kernel_log(case: Case, env: dict[str, str], clock: FakeClock) -> None:
    (path,) = case.paths
    cards, expected = XID_LOGS[path.name]
    workdir = Path(env["FAKE_NVIDIA_LOG"]).parent
    assert_counts(follow_kmsg_file(path.read_text(), cards, workdir, env), cards, expected)
    if path.name.startswith("kmsg-"):  # [uptime] stamps: the dmesg fallback counts it too
        log = workdir / "dmesg.log"
        log.write_text("[6781000.000001] an older line, history at the first poll\n")
        store = XidStore()
        follower = XidFollower(
            store, ToolRunner(timeout_s=30, max_output_bytes=1 << 20,
                              env={**env, "FAKE_DMESG_LOG": str(log)}),
            lambda: _readings(cards), kmsg_path="", dmesg=DMESG, journalctl="", interval_s=60)
        follower.poll_once()
        with log.open("a") as fh:
            fh.write(path.read_text())
        follower.poll_once()
        follower.poll_once()  # the same history again: nothing counted twice
        registry = CollectorRegistry(auto_describe=False)
        registry.register(XidCollector(store))
        assert_counts(scrape(registry), cards, expected)


LOG_CHECKS: dict[str, Check] = dict.fromkeys(XID_LOGS, check_kernel_log)
