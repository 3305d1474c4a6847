"""NVSwitch SXid errors from the kernel log: one error per severity line, counted per switch,
code and severity by the Xid follower, from a real kernel log (../shared/fixtures/nvidia), and read
back by the evaluator as the node's series."""

from __future__ import annotations

from pathlib import Path

from gpu_health.contract import MAX_SXID_SERIES, SXID_METRIC
from gpu_health.evaluator.ingest.cards import parse_cards
from gpu_health.exporter.parsers import xid
from gpu_health.exporter.xid_store import XidStore, sxid_family
from tests.shared import require_shared

from .test_xid import _append, _follower, _scrape

# The Fabric Manager guide's and a public kernel-log dataset's line forms (switch, PCI, code).
FATAL = "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up"
NON_FATAL = ("nvidia-nvswitch4: SXid (PCI:0000:c6:00.0): 19084, Non-fatal, Link 29 AN1 Heartbeat "
             "Timeout Error (First)")


def test_the_severity_line_is_the_error_and_its_detail_lines_are_not() -> None:
    for prefix in ("", "[6781753.400584] ", "4,2101,6781753400584,-;"):
        fatal = xid.parse_event(prefix + FATAL)
        assert isinstance(fatal, xid.SxidEvent)
        assert (fatal.switch, fatal.pci_bus_id, fatal.sxid, fatal.fatal) == (
            0, "0000:c2:00", 20034, True)
    other = xid.parse_event(NON_FATAL)
    assert isinstance(other, xid.SxidEvent) and (other.switch, other.fatal) == (4, False)
    for detail in ("nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 10002, Severity 5 Engine "
                   "instance 00 Sub-engine instance 00",
                   "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000}"):
        assert xid.parse_event(detail) is None
    assert xid.parse_line(FATAL) is None  # never a GPU's Xid


def test_a_real_kernel_log_counts_each_switch_error_once(tool_env: dict[str, str],
                                                         tmp_path: Path) -> None:
    log = (require_shared() / "nvidia" / "kmsg-xid79-sxid20034.log").read_text()
    follower, dmesg_log, _ = _follower(tool_env, tmp_path)
    assert _scrape(follower).series(SXID_METRIC) == []  # none logged yet: no series
    _append(dmesg_log, log)
    follower.poll_once()
    metrics = _scrape(follower)
    counts = {(s["nvswitch"], s["pci_bus_id"], s["sxid"], s["severity"]):
              metrics.get(SXID_METRIC, **s) for s in metrics.series(SXID_METRIC)}
    # four "Fatal" lines; the "Severity" and "Data" lines after them are the same errors
    assert counts == {("0", "0000:05:00", "20034", "fatal"): 2,
                      ("1", "0000:06:00", "20034", "fatal"): 1,
                      ("2", "0000:07:00", "20034", "fatal"): 1}
    # its Xid 79 names a GPU at 91:00 that this node does not have: unmatched, never invented
    assert metrics.get("gpu_health_exporter_xid_lines_unmatched_total") == 1
    # the evaluator reads the exporter's exposition as the node's series, none lost
    assert parse_cards(metrics.text).sxids == (((0, "0000:05:00", 20034, True), 2),
                                               ((1, "0000:06:00", 20034, True), 1),
                                               ((2, "0000:07:00", 20034, True), 1))


def test_series_are_bounded_and_absent_while_no_log_is_readable() -> None:
    store = XidStore()
    store.record(xid.SxidEvent(0, "0000:05:00", code, True, None)
                 for code in range(MAX_SXID_SERIES + 3))
    snap = store.snapshot()
    assert len(snap.sxids) == MAX_SXID_SERIES and snap.errors["sxid_series_limit"] == 3
    assert sxid_family(snap).samples == []  # no source readable: unknown, no series
    store.set_readable({"kmsg": True})
    assert len(sxid_family(store.snapshot()).samples) == MAX_SXID_SERIES
