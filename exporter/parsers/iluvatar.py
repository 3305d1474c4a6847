"""Iluvatar CoreX ``ixsmi -q -x`` (XML): ``ecc_errors`` single-bit and double-bit counts.

Facts (capture ../shared/fixtures/vendors/iluvatar-ixsmi-q-x-MR-V100-4.2.0.txt, driver 4.2.0,
2x MR-V100): root ``<ixsmi_log>``, one ``<gpu id="<bus id>">`` per device with
``<minor_number>`` (0, 1: the index the default table prints as ``GPU``), ``<product_name>``,
``<uuid>`` (``GPU-...``), ``<pci><pci_bus_id>`` and::

    <ecc_errors> <single_bit>0</single_bit> <double_bit>0</double_bit> </ecc_errors>

Single-bit errors are the corrected ones and double-bit errors the uncorrectable ones (SECDED
ECC), so they feed ``ecc_corrected_total`` / ``ecc_uncorrected_total``. The XML does not say
whether the counts are volatile (since driver load) or aggregate (lifetime): unverified; a
reset shows up as a counter reset either way. No retired-page or row-remap field exists.
``N/A`` is unknown. The default ``ixsmi`` table has no ECC column and is not read.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..tool_output import CardReading, ParsedOutput, make_counters
from . import smi_xml
from .cells import CellReader, parse_index, require_unique

VENDOR = "iluvatar"
ROOT = "ixsmi_log"
TOOL = "ixsmi -q -x"


def parse_xml(text: str) -> ParsedOutput:
    """Every ``<gpu>`` of an ``ixsmi -q -x`` document."""
    root = smi_xml.parse_document(text, ROOT, TOOL)
    reader = CellReader()
    readings = [_reading(gpu, reader) for gpu in root.findall("gpu")]
    return ParsedOutput(require_unique(readings, TOOL), tuple(reader.anomalies))


def _reading(gpu: ET.Element, reader: CellReader) -> CardReading:
    index = parse_index(smi_xml.text_at(gpu, "minor_number") or "", f"{TOOL} minor_number")
    where = f"{TOOL} gpu {index} ecc_errors"
    counts = {
        name: None if value is None else reader.count(value, f"{where}/{name}")
        for name in ("single_bit", "double_bit")
        for value in [smi_xml.text_at(gpu, f"ecc_errors/{name}")]
    }
    return CardReading(
        vendor=VENDOR,
        gpu=index,
        uuid=smi_xml.identity_text(gpu, "uuid"),
        model=smi_xml.identity_text(gpu, "product_name") or "",
        counters=make_counters({
            "ecc_corrected_total": counts["single_bit"],
            "ecc_uncorrected_total": counts["double_bit"],
        }),
        pci_bus_id=smi_xml.identity_text(gpu, "pci/pci_bus_id") or gpu.get("id"),
    )
