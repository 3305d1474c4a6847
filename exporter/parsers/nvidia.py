"""nvidia-smi: the ``--help-query-gpu`` field list and ``--query-gpu`` CSV output.

Facts this relies on (captures in ../shared/fixtures/nvidia, drivers 442 to 610):
- The help text starts with ``List of valid properties to query for the switch "--query-gpu":``
  (``"--query-gpu=":`` in 2021-era drivers such as 466) and lists each field on a line of its
  own, with aliases: ``"name" or "gpu_name"``. Other quoted lines carry prose after the quotes
  (``"0: Default" means ...``) and are not fields.
- Drivers up to 535 list no ``remapped_rows.*`` fields, and ONE unknown field name makes the
  whole query fail (exit 2), so only fields the help lists may be asked for.
- The CSV header may name a field differently from the alias asked for (570 answers
  ``clocks_throttle_reasons.*`` with ``clocks_event_reasons.*``): columns are mapped by the
  position of the field in OUR query, and the query asks for no header at all.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

from gpu_health.contract import SLOWDOWN_REASONS, CounterKey, LinkKey, RemapKey
from gpu_health.errors import ParseError

from ..tool_output import (
    CardReading,
    ParsedOutput,
    PcieLink,
    make_counters,
    make_link,
    make_remap,
)
from .cells import CellReader, is_declared_unknown, parse_index, require_unique

VENDOR = "nvidia"

ECC_CORRECTED = "ecc.errors.corrected.aggregate.total"
ECC_UNCORRECTED = "ecc.errors.uncorrected.aggregate.total"
RETIRED_SBE = "retired_pages.single_bit_ecc.count"
RETIRED_DBE = "retired_pages.double_bit.count"
REMAP_PENDING = "remapped_rows.pending"
REMAP_FAILURE = "remapped_rows.failure"

# The candidate health fields, probed against the help text on every driver.
HEALTH_FIELDS: tuple[str, ...] = (
    ECC_CORRECTED,
    ECC_UNCORRECTED,
    RETIRED_SBE,
    RETIRED_DBE,
    REMAP_PENDING,
    REMAP_FAILURE,
)
# Row-remap details, probed and queried like the health fields (drivers > 450 list them).
REMAP_DETAIL_FIELDS: dict[str, RemapKey] = {
    "remapped_rows.correctable": "remapped_rows_correctable",
    "remapped_rows.uncorrectable": "remapped_rows_uncorrectable",
    "remapped_rows.histogram.max": "remap_banks_max",
    "remapped_rows.histogram.high": "remap_banks_high",
    "remapped_rows.histogram.partial": "remap_banks_partial",
    "remapped_rows.histogram.low": "remap_banks_low",
    "remapped_rows.histogram.none": "remap_banks_none",
}
# The driver's recommended recovery action and pending page retirement (Volta's "pending page
# blacklist", the only pending signal where remapped_rows.* reads N/A). Driver 580 on an H200
# lists both; its CSV shows "None" and "[N/A]" (tests/fixtures/nvidia-h200-580.159.04).
RECOVERY_ACTION = "gpu_recovery_action"
PAGES_PENDING = "retired_pages.pending"
# Beyond memory, listed by drivers 535 to 610 (captures: ../shared/fixtures/nvidia/query-*-full.csv;
# ours: tests/fixtures/nvidia-h200-580.159.04). pcie.link.gen.current is deprecated in favour of
# gpucurrent (both listed by 535 and 610): the newer name is read first, the older where it is
# the only one. An idle card trains its link down (an RTX 2080 Super on 595: gen 1 of 3).
PCIE_FIELDS: dict[str, LinkKey] = {
    "pcie.link.gen.gpucurrent": "pcie_link_generation",
    "pcie.link.gen.current": "pcie_link_generation",
    "pcie.link.gen.max": "pcie_link_generation_max",
    "pcie.link.width.current": "pcie_link_width",
    "pcie.link.width.max": "pcie_link_width_max",
}
# Microseconds since the driver loaded (580 on an H200 lists them; with nounits a bare number).
SLOWDOWN_FIELDS: dict[str, str] = {
    f"clocks_event_reasons_counters.{reason}": reason for reason in SLOWDOWN_REASONS}
# "Completed" and "Success" on H100/H200 with driver 590; "N/A" without NVSwitch (L40S, RTX).
FABRIC_STATE = "fabric.state"
FABRIC_STATUS = "fabric.status"
PROBED_FIELDS: tuple[str, ...] = (*HEALTH_FIELDS, *REMAP_DETAIL_FIELDS, RECOVERY_ACTION,
                                  PAGES_PENDING, *PCIE_FIELDS, *SLOWDOWN_FIELDS, FABRIC_STATE,
                                  FABRIC_STATUS)
# The CSV's text for NVML's recovery actions. Only "None" is captured (580, H200); the others
# are NVIDIA's documented names ("GPU Memory Error Management": Reset, Reboot, Drain P2P,
# Drain and Reset) in the spellings nvidia-smi's -q uses; anything else is unknown, counted.
_RECOVERY: dict[str, str] = {
    "none": "none", "gpu reset": "gpu_reset", "reset": "gpu_reset",
    "node reboot": "node_reboot", "reboot": "node_reboot", "drain p2p": "drain_p2p",
    "drain and reset": "drain_and_reset", "drain p2p and reset": "drain_and_reset",
}
REQUIRED_IDENTITY: tuple[str, ...] = ("index", "name")
OPTIONAL_IDENTITY: tuple[str, ...] = ("uuid", "pci.bus_id")

_HEADER = re.compile(r'List of valid properties to query for the switch "(--query-gpu=?)":')
_FIELD_LINE = re.compile(r'"[^"\s]+"(?: or "[^"\s]+")*')
_NAME = re.compile(r'"([^"\s]+)"')
_DIRECT: dict[str, CounterKey] = {
    ECC_UNCORRECTED: "ecc_uncorrected_total",
    ECC_CORRECTED: "ecc_corrected_total",
}
_FLAGS: dict[str, CounterKey] = {
    REMAP_PENDING: "remapped_rows_pending",
    REMAP_FAILURE: "remapped_rows_failure",
}


@dataclass(frozen=True, slots=True)
class HelpFields:
    """Every field name (aliases included) one ``--help-query-gpu`` text lists."""

    names: frozenset[str]
    switch: str  # "--query-gpu" or, in older drivers, "--query-gpu="

    def supports(self, field: str) -> bool:
        return field in self.names


def parse_help(text: str) -> HelpFields:
    """Parse ``nvidia-smi --help-query-gpu``; ParseError when the text is not one."""
    lines = [line.strip() for line in text.splitlines()]
    head = [line for line in lines if line][:5]
    switch = next((m.group(1) for m in map(_HEADER.fullmatch, head) if m), None)
    if switch is None:
        raise ParseError("not a --help-query-gpu text: the 'List of valid properties' header "
                         "is missing")
    names = frozenset(
        name for line in lines if _FIELD_LINE.fullmatch(line) for name in _NAME.findall(line)
    )
    if not names:
        raise ParseError("--help-query-gpu text lists no fields")
    return HelpFields(names=names, switch=switch)


def plan_columns(
    help_fields: HelpFields, rejected: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """The ``--query-gpu`` column list: identity first, then every supported health field.

    ``rejected`` holds fields the help lists but the driver refused anyway (exit 2); they stay
    out until the help text changes.
    """
    missing = [f for f in REQUIRED_IDENTITY if not help_fields.supports(f)]
    if missing:
        raise ParseError(f"--help-query-gpu does not list {', '.join(missing)}")
    wanted = (*REQUIRED_IDENTITY, *OPTIONAL_IDENTITY, *PROBED_FIELDS)
    return tuple(
        f
        for f in wanted
        if help_fields.supports(f) and (f in REQUIRED_IDENTITY or f not in rejected)
    )


_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query\.')


def rejected_field(stdout: str) -> str | None:
    """The field nvidia-smi names when it refuses a query (exit 2), else None."""
    match = _INVALID_FIELD.search(stdout)
    return match.group(1) if match else None


def parse_query(text: str, columns: Sequence[str]) -> ParsedOutput:
    """Parse ``--query-gpu=<columns> --format=csv,noheader,nounits`` output.

    Any row with the wrong number of cells or without a card index rejects the whole output
    (a truncated or garbled answer cannot be trusted row by row).
    """
    if "index" not in columns:
        raise ParseError("a --query-gpu column list must contain 'index'")
    reader = CellReader()
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        rows = list(csv.reader(lines, skipinitialspace=True))
    except csv.Error as exc:
        raise ParseError(f"nvidia-smi output is not CSV: {exc}") from exc
    readings = []
    for number, row in enumerate(rows, start=1):
        if len(row) != len(columns):
            raise ParseError(
                f"nvidia-smi row {number} has {len(row)} cells, expected {len(columns)} "
                "(truncated or extra columns)"
            )
        cells = dict(zip(columns, (cell.strip() for cell in row), strict=True))
        readings.append(_reading(cells, number, reader))
    return ParsedOutput(require_unique(readings, "nvidia-smi"), tuple(reader.anomalies))


def _reading(cells: dict[str, str], number: int, reader: CellReader) -> CardReading:
    gpu = parse_index(cells["index"], f"nvidia-smi row {number}")
    where = f"nvidia-smi gpu {gpu}"
    known: dict[CounterKey, int | None] = {}
    for field, key in _DIRECT.items():
        if field in cells:
            known[key] = reader.count(cells[field], f"{where} {field}")
    for field, key in _FLAGS.items():
        if field in cells:
            known[key] = reader.flag(cells[field], f"{where} {field}")
    known["retired_pages"] = _retired_pages(cells, where, reader)
    remap = {key: reader.count(cells[field], f"{where} {field}")
             for field, key in REMAP_DETAIL_FIELDS.items() if field in cells}
    fabric = _label(cells, FABRIC_STATE, _FABRIC_STATES, where, reader)
    return CardReading(
        vendor=VENDOR,
        gpu=gpu,
        uuid=_text(cells.get("uuid")),
        model=_text(cells.get("name")) or "",
        counters=make_counters(known),
        pci_bus_id=_text(cells.get("pci.bus_id")),
        remap=make_remap(remap),
        recovery_action=_label(cells, RECOVERY_ACTION, _RECOVERY, where, reader),
        pages_pending=None if PAGES_PENDING not in cells else reader.flag(
            cells[PAGES_PENDING], f"{where} {PAGES_PENDING}"),
        pcie=_pcie(cells, where, reader),
        slowdown_us=MappingProxyType({
            reason: us for field, reason in SLOWDOWN_FIELDS.items() if field in cells
            and (us := reader.count(cells[field], f"{where} {field}")) is not None}),
        fabric_state=fabric,
        fabric_ok=_fabric_ok(cells.get(FABRIC_STATUS), fabric),
    )


def _pcie(cells: dict[str, str], where: str, reader: CellReader) -> PcieLink:
    """The link's generation and width, now and at most; a field's first listed name wins."""
    known: dict[LinkKey, int | None] = {}
    for field, key in PCIE_FIELDS.items():
        if field in cells and known.get(key) is None:
            known[key] = reader.count(cells[field], f"{where} {field}")
    return make_link(known)


# NVML's fabric states in nvidia-smi's spelling ("Completed" captured; the others as NVIDIA's
# NVML_GPU_FABRIC_STATE_* names them); other text is unknown, counted as an unusable value.
_FABRIC_STATES: dict[str, str] = {"not supported": "not_supported", "not started": "not_started",
                                  "in progress": "in_progress", "completed": "completed"}


def _fabric_ok(cell: str | None, state: str | None) -> int | None:
    """``fabric.status`` is NVML's return code, valid only once registration completed: 1 for
    "Success", 0 for any other code; unknown before completion or where the driver says N/A."""
    if cell is None or is_declared_unknown(cell) or state != "completed":
        return None
    return 1 if cell.strip().lower() == "success" else 0


def _label(cells: dict[str, str], field: str, spellings: dict[str, str], where: str,
           reader: CellReader) -> str | None:
    """A text field's label value (case, spaces and underscores aside: ``Drain P2P`` and
    ``drain_p2p`` alike); None (unknown) when not asked, for [N/A], an error or new text, the
    last two counted as unusable."""
    cell = cells.get(field)
    if cell is None:
        return None
    label = spellings.get(" ".join(cell.lower().replace("_", " ").split()))
    if label is None:
        reader.unusable(cell, f"{where} {field}")
    return label


def _retired_pages(cells: dict[str, str], where: str, reader: CellReader) -> int | None:
    """Single-bit plus double-bit retired pages; unknown if either part is unknown."""
    parts = [
        reader.count(cells[f], f"{where} {f}") if f in cells else None
        for f in (RETIRED_SBE, RETIRED_DBE)
    ]
    sbe, dbe = parts
    return None if sbe is None or dbe is None else sbe + dbe


def _text(cell: str | None) -> str | None:
    return None if cell is None or is_declared_unknown(cell) else cell
