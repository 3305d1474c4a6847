"""Kunlunxin ``xpu-smi -q -x`` (XML) and telling Intel's ``xpu-smi`` apart from Kunlunxin's.

XML facts (capture ../shared/fixtures/vendors/kunlun-xpu-smi-gen3-P800-q-x-excerpt.txt, driver
5.19.0.0, P800 OAM): root ``<xpu_smi_log>``, one ``<xpu id="<bus id>">`` per device with
``<minor_number>`` (the index the table prints as ``XPU``), ``<product_name>``, ``<uuid>``
(``GPU-...``), ``<pci><pci_bus_id>`` and::

    <ecc_errors>
        <volatile>  <dram_correctable>0</…>  <dram_uncorrectable>0</…>  </volatile>
        <aggregate> <dram_correctable>0</…>  <dram_uncorrectable>0</…>  </aggregate>
    </ecc_errors>

The AGGREGATE block feeds ``ecc_corrected_total`` / ``ecc_uncorrected_total`` (the contract's
counters are aggregate, as for NVIDIA); a counter whose aggregate element is missing falls back
to the volatile one (what the table shows), but one that is present and unknown stays unknown.
``N/A`` and ``Invalid Argument`` (the tool's answer for unsupported fields, e.g.
``xpu_target_temp_min``) are unknown. No retired-page or row-remap field exists: those stay
absent. ``<pci_device>`` appears twice per device in 5.19; nothing here reads it.

Intel ships a different tool under the same name (intel/xpumanager ``xpu-smi``): with no
arguments it prints its help (``Intel(R) XPU System Management Interface -- v1.x``), its tables
start ``| Device ID | Device Information |``, its JSON has ``"device_list"``, and it rejects
``-q -x`` (CLI11, exit 2). :func:`is_intel_output` recognises those so no Kunlunxin metric is
ever made from Intel output.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ..tool_output import CardReading, ParsedOutput, make_counters
from . import smi_xml
from .cells import CellReader, parse_index, require_unique
from .kunlunxin import VENDOR

ROOT = "xpu_smi_log"
TOOL = "xpu-smi -q -x"
UNKNOWN_WORDS = frozenset({"Invalid Argument"})

_INTEL = re.compile(
    r"Intel(?:\(R\))? XPU|XPU-SMI Command Line Interface|XPUM Service"
    r"|\|\s*Device ID\s*\|\s*Device Information|\"device_list\"\s*:"
)


def is_intel_output(text: str) -> bool:
    """True when ``text`` comes from Intel's xpu-smi (help, tables, JSON, service errors)."""
    return _INTEL.search(text) is not None


def looks_like_xml(text: str) -> bool:
    return smi_xml.looks_like(text, ROOT)


def parse_xml(text: str) -> ParsedOutput:
    """Every ``<xpu>`` of an ``xpu-smi -q -x`` document."""
    root = smi_xml.parse_document(text, ROOT, TOOL)
    reader = CellReader(UNKNOWN_WORDS)
    readings = [_reading(xpu, reader) for xpu in root.findall("xpu")]
    return ParsedOutput(require_unique(readings, TOOL), tuple(reader.anomalies))


def _reading(xpu: ET.Element, reader: CellReader) -> CardReading:
    gpu = parse_index(smi_xml.text_at(xpu, "minor_number") or "", f"{TOOL} minor_number")
    where = f"{TOOL} xpu {gpu}"
    return CardReading(
        vendor=VENDOR,
        gpu=gpu,
        uuid=smi_xml.identity_text(xpu, "uuid", UNKNOWN_WORDS),
        model=smi_xml.identity_text(xpu, "product_name", UNKNOWN_WORDS) or "",
        counters=make_counters({
            "ecc_corrected_total": _ecc(xpu, "dram_correctable", reader, where),
            "ecc_uncorrected_total": _ecc(xpu, "dram_uncorrectable", reader, where),
        }),
        pci_bus_id=smi_xml.identity_text(xpu, "pci/pci_bus_id") or xpu.get("id"),
    )


def _ecc(xpu: ET.Element, name: str, reader: CellReader, where: str) -> int | None:
    for block in ("aggregate", "volatile"):
        value = smi_xml.text_at(xpu, f"ecc_errors/{block}/{name}")
        if value is not None:
            return reader.count(value, f"{where} {block}/{name}")
    return None
