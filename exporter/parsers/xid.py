"""NVIDIA Xid lines in the kernel log: one line in, an :class:`XidEvent` (or None) out.

The driver prints (open-gpu-kernel-modules format strings, and the captures in
../shared/fixtures/nvidia/*.log)::

    NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s ...
    NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp ...
    NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.        (no pid: older drivers)
    NVRM: Xid (0000:01:00): 31, Ch 00000004, ...                         (no "PCI:": old drivers)
    NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: ...    (MIG: GPU instance)
    NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, ...               (MIG: + compute inst.)

The PCI id carries no function number; :func:`~gpu_health.exporter.parsers.cells.pci_key` brings it
and nvidia-smi's ``00000000:9B:00.0`` to one spelling. NOT Xids: the multi-line "has fallen off
the bus" message that newer open kernel modules (570) print without any Xid line.

NVSwitch errors (SXids) are :class:`SxidEvent`. The NVSwitch driver prints one error as several
lines with the same switch and code (../shared/fixtures/nvidia/kmsg-xid79-sxid20034.log, and the
Fabric Manager user guide's examples)::

    nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up
    nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine ...
    nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x10000000, ...}
    nvidia-nvswitch4: SXid (PCI:0000:c6:00.0): 19084, Non-fatal, Link 29 AN1 Heartbeat Timeout ...

Only the line that names the severity (``Fatal`` or ``Non-fatal``) is an error; the ``Severity``
and ``Data`` lines after it describe the same one and are not counted.

A line may start with a timestamp: ``[ 1843.308145]`` (dmesg, journalctl ``short-monotonic``)
or a ``/dev/kmsg`` record prefix ``6,1234,5678901,-;`` (microseconds). Both are seconds since
boot and become ``uptime_s``; the ``dmesg -T`` and ``--time-format iso`` prefixes are wall-clock
times and give ``None`` (the follower never asks for those formats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .cells import pci_key

_XID = re.compile(
    r"(?<![A-Za-z])NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
    r"(?:\.[0-9A-Fa-f])?)(?P<mig>(?: GPU-C?I:\s*[0-9]+)*)\): (?P<xid>[0-9]+)\b"
)
_SXID = re.compile(
    r"nvidia-nvswitch(?P<switch>[0-9]+): SXid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
    r"[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)\): (?P<sxid>[0-9]+), (?P<severity>Fatal|Non-fatal),"
)
_KMSG = re.compile(r"[0-9]+,[0-9]+,(?P<usec>[0-9]+),[^;]*;")
_BRACKET = re.compile(r"\[\s*(?P<sec>[0-9]+\.[0-9]+)\]")


@dataclass(frozen=True, slots=True)
class XidEvent:
    """One Xid line: the card's PCI id (``pci_key`` spelling), the Xid number, the kernel
    timestamp in seconds since boot where the line carries one, and the line itself."""

    pci_bus_id: str
    xid: int
    uptime_s: float | None
    raw: str


@dataclass(frozen=True, slots=True)
class SxidEvent:
    """One NVSwitch error: the switch's number (``nvidia-nvswitchN``) and PCI id (``pci_key``
    spelling), the SXid number, whether the driver calls it fatal, and the kernel timestamp."""

    switch: int
    pci_bus_id: str
    sxid: int
    fatal: bool
    uptime_s: float | None


def uptime_of(line: str) -> float | None:
    """Seconds since boot from a kmsg record prefix or a leading ``[ 123.456]``; else None."""
    kmsg = _KMSG.match(line)
    if kmsg is not None:
        return int(kmsg.group("usec")) / 1_000_000
    bracket = _BRACKET.match(line)
    return float(bracket.group("sec")) if bracket is not None else None


def parse_line(line: str) -> XidEvent | None:
    """The Xid event on ``line``, or None when it is not an Xid line."""
    if "Xid" not in line:  # cheap pre-filter: most kernel lines are something else
        return None
    match = _XID.search(line)
    if match is None:
        return None
    key = pci_key(match.group("pci"))
    if key is None:
        return None
    return XidEvent(pci_bus_id=key, xid=int(match.group("xid")), uptime_s=uptime_of(line),
                    raw=line.rstrip("\n"))


def parse_event(line: str) -> XidEvent | SxidEvent | None:
    """The Xid or SXid error on ``line``, or None (any other line, an SXid's detail lines)."""
    if "SXid" in line:
        match = _SXID.search(line)
        key = None if match is None else pci_key(match.group("pci"))
        if match is None or key is None:
            return None
        return SxidEvent(switch=int(match.group("switch")), pci_bus_id=key,
                         sxid=int(match.group("sxid")), fatal=match.group("severity") == "Fatal",
                         uptime_s=uptime_of(line))
    return parse_line(line)
