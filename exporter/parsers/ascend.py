"""Huawei Ascend ``npu-smi info`` (cards and chips) and ``npu-smi info -t ecc -i N`` (per card).

Table facts (captures in ../shared/fixtures/vendors, npu-smi 22.0.3 to 26.0.rc2): two lines per
chip. The first holds the NPU (card) id and name, the second the chip id and the bus id::

    | NPU   Name                | Health        | Power(W) ...
    | Chip                      | Bus-Id        | AICore(%) ...          (24.1: "Chip")
    | 0     910B2               | OK            | 96.4 ...
    | 0                         | 0000:C1:00.0  | 0 ...

22.0.3 heads the second line ``Chip    Device``; A3 (dual-die, 24.1.rc3 and 26.0.rc2) heads it
``Chip  Phy-ID`` and prints two chips under one NPU id, each with its own bus id; the 950
layout splits ``| NPU ID | Name |`` into two cells and leaves the chip cells blank. The process
table below starts with ``Process id`` and ends the parse. Truncated copies (issue excerpts) may
lose the closing ``|`` of the last line, so it is not required.

``gpu`` label: the chip's ``Phy-ID`` where the table has one (A3: every die is a device of its
own and the Phy-ID is unique on the node), else the NPU id. A layout without Phy-ID that shows
two chips under one NPU cannot label them apart and is rejected (no such output seen).

ECC facts (910A doc example, CANN 23.0.5; 950 doc example): ``key : value`` lines such as
``HBM Single Bit Aggregate Total Err Cnt : 0`` for DDR and/or HBM, single and double bit,
``Error Count`` / ``Aggregate Total Err Cnt`` / ``Isolated Pages Count``; a 910A block ends with
``Chip ID : 0``. Single bit = corrected, double bit = uncorrected (SECDED), summed over the
memories the output lists (910A lists DDR and HBM, 950 only HBM); the aggregate total is used,
the plain count only where no aggregate line exists. Isolated pages (single + double) are
retired pages; "Next-Isolated" pages (950) are pending and not counted. ``NA`` and ``-`` are
unknown. There are no row-remap counters: those stay absent. A card that prints "does not
support querying ecc" (exit 0) has every counter unknown, not 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpu_health.errors import ParseError

from ..tool_output import CardReading, Counters, Failure, ParsedOutput, make_counters
from .cells import PCI_ADDRESS, CellReader, parse_index, require_unique

VENDOR = "ascend"
UNKNOWN_WORDS = frozenset({"NA", "-"})
_ECC_KEY = re.compile(
    r"(DDR|HBM) (Single|Double) Bit (Error Count|Aggregate Total Err Cnt|Isolated Pages Count)")
_KEY_VALUE = re.compile(r"\s*(\S.*?)\s*:\s*(.*?)\s*")
_REFUSED = re.compile(r"Invalid card id|Error parameter|Usage: npu-smi", re.IGNORECASE)
_UNSUPPORTED = re.compile(r"not support", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class AscendChip:
    """One chip line pair of ``npu-smi info``; ``gpu`` is its label (see module doc)."""

    npu: int
    chip: int
    gpu: int
    name: str
    bus: str | None


@dataclass(frozen=True, slots=True)
class EccBlock:
    """The counters of one chip in ``npu-smi info -t ecc``; ``chip`` None when unlabelled."""

    chip: int | None
    counters: Counters


def cells(line: str) -> list[str]:
    """'|'-separated cells; the closing '|' may be missing (truncated copies)."""
    stripped = line.strip()
    if not stripped.startswith("|") or stripped.startswith("|="):
        return []
    return [c.strip() for c in stripped[1:].removesuffix("|").split("|")]


def parse_table(text: str) -> tuple[AscendChip, ...]:
    """Every chip of the ``npu-smi info`` device table."""
    split_id = None  # 950 layout: "| NPU ID | Name |"
    second_id: str | None = None  # "Phy-ID" or "Device" (22.0.3), heading the chip lines
    pending: list[tuple[int, int, int | None, str, str | None]] = []
    card: tuple[int, str] | None = None
    for row in map(cells, text.splitlines()):
        if not row:
            continue
        tokens = row[0].split()
        if split_id is None:
            if tokens[:1] == ["NPU"] and len(row) > 1:
                split_id = tokens[:2] == ["NPU", "ID"]
            continue
        if any("Process id" in c for c in row):
            break
        if tokens[:1] == ["Chip"]:
            second_id = tokens[1] if len(tokens) > 1 else None
            continue
        bus_cell = row[2] if split_id and len(row) > 2 else row[1] if len(row) > 1 else ""
        bus = bus_cell.split()[0] if bus_cell.split() else ""
        if not PCI_ADDRESS.fullmatch(bus):  # a card line: NPU id, name, health
            if not tokens:
                continue
            name = row[1] if split_id and len(row) > 1 else " ".join(tokens[1:])
            card = (parse_index(tokens[0], "npu-smi NPU id"), name)
            continue
        if card is None:
            raise ParseError("npu-smi chip line before any NPU line")
        chip = parse_index(tokens[0], "npu-smi chip id") if tokens else 0
        extra = parse_index(tokens[1], f"npu-smi {second_id}") if len(tokens) > 1 else None
        pending.append((card[0], chip, extra, card[1], bus))
    if split_id is None:
        raise ParseError("not an npu-smi info table: the 'NPU ... Name' header is missing")
    return _label(pending, use_second=second_id == "Phy-ID")


def _label(
    rows: list[tuple[int, int, int | None, str, str | None]], *, use_second: bool
) -> tuple[AscendChip, ...]:
    chips = []
    per_npu: dict[int, int] = {}
    for npu, chip, second, name, bus in rows:
        per_npu[npu] = per_npu.get(npu, 0) + 1
        if use_second and second is None:
            raise ParseError(f"npu-smi NPU {npu} chip {chip} has no Phy-ID")
        gpu = second if use_second and second is not None else npu
        chips.append(AscendChip(npu, chip, gpu, name, bus))
    if not use_second and any(n > 1 for n in per_npu.values()):
        raise ParseError("npu-smi lists several chips under one NPU id without a Phy-ID column "
                         "to tell them apart; this layout is not supported")
    return tuple(chips)


def parse_ecc(text: str, npu: int, reader: CellReader) -> tuple[EccBlock, ...]:
    """The per-chip blocks of ``npu-smi info -t ecc -i <npu>``; () when ECC is unsupported.

    ParseError when npu-smi refused the query (``Invalid card id.`` + usage) or printed
    something else than ECC counters.
    """
    refused = next((line for line in text.splitlines() if _REFUSED.search(line)), None)
    if refused is not None:
        raise ParseError(f"npu-smi refused the ECC query for NPU {npu}: {refused.strip()[:120]!r}")
    blocks: list[EccBlock] = []
    values: dict[tuple[str, str, str], str] = {}
    for line in text.splitlines():
        pair = _KEY_VALUE.fullmatch(line)
        if pair is None:
            continue
        key = _ECC_KEY.fullmatch(pair.group(1))
        if key is not None:
            values[(key.group(1), key.group(2), key.group(3))] = pair.group(2)
        elif pair.group(1) == "Chip ID" and values:
            chip = parse_index(pair.group(2), "npu-smi ecc Chip ID")
            blocks.append(EccBlock(chip, _counters(values, f"NPU {npu} chip {chip}", reader)))
            values = {}
    if values:
        blocks.append(EccBlock(None, _counters(values, f"NPU {npu}", reader)))
    if not blocks and not _UNSUPPORTED.search(text):
        raise ParseError(f"npu-smi -t ecc for NPU {npu} printed no ECC counter")
    return tuple(blocks)


def _counters(values: Mapping[tuple[str, str, str], str], where: str,
              reader: CellReader) -> Counters:
    memories = sorted({memory for memory, _, _ in values})

    def total(bits: Sequence[str], kinds: Sequence[str]) -> int | None:
        parts: list[int | None] = []
        for memory in memories:
            for bit in bits:
                kind = next((k for k in kinds if (memory, bit, k) in values), None)
                raw = values[(memory, bit, kind)] if kind is not None else ""
                parts.append(reader.count(raw, f"npu-smi ecc {where} {memory} {bit} {kind}"))
        return None if not parts or None in parts else sum(p for p in parts if p is not None)

    counts = ("Aggregate Total Err Cnt", "Error Count")
    return make_counters({
        "ecc_corrected_total": total(["Single"], counts),
        "ecc_uncorrected_total": total(["Double"], counts),
        "retired_pages": total(["Single", "Double"], ["Isolated Pages Count"]),
    })


def combine(
    chips: Sequence[AscendChip],
    ecc: Mapping[int, tuple[EccBlock, ...] | Failure],
    anomalies: Sequence[str] = (),
) -> ParsedOutput:
    """Readings for every chip; a card whose ECC query failed is listed with unknown counters."""
    chips_per_npu: dict[int, int] = {}
    for chip in chips:
        chips_per_npu[chip.npu] = chips_per_npu.get(chip.npu, 0) + 1
    readings = []
    for chip in chips:
        report = ecc.get(chip.npu)
        counters = make_counters()
        if isinstance(report, tuple):
            match = [b for b in report if b.chip == chip.chip]
            unlabelled = [b for b in report if b.chip is None]
            if match:
                counters = match[0].counters
            elif len(unlabelled) == 1 and chips_per_npu[chip.npu] == 1:
                counters = unlabelled[0].counters  # 950: one chip, no "Chip ID" line
        readings.append(CardReading(vendor=VENDOR, gpu=chip.gpu, uuid=None, model=chip.name,
                                    counters=counters, pci_bus_id=chip.bus))
    failures = tuple(r for r in ecc.values() if isinstance(r, Failure))
    return ParsedOutput(require_unique(readings, "npu-smi"), tuple(anomalies), failures)
