"""Huawei Ascend cards through ``npu-smi``: the ``info`` table, then one ECC query per card.

npu-smi has no "all cards" ECC query, so a tick runs ``npu-smi info`` once and then
``npu-smi info -t ecc -i <NPU id>`` per card, at most ``MAX_PARALLEL`` at a time, all inside ONE
deadline: ``--tool-timeout`` for the whole tick, table included, so an eight-card node cannot
take eight timeouts. A card whose query fails, times out or is never started before the
deadline is listed with unknown counters and its failure is counted by reason; the other cards
are still reported and the tick counts as a success.
"""

from __future__ import annotations

import time
from datetime import datetime

from gpu_health.errors import CollectError, ParseError
from gpu_health.runner import ToolResult

from ..parsers import ascend
from ..parsers.cells import CellReader
from ..tool_output import Failure, ParsedOutput
from .base import VendorSource

MAX_PARALLEL = 4


class AscendSource(VendorSource):
    """``npu-smi info``, then ``npu-smi info -t ecc -i N`` per card under one deadline."""

    vendor = ascend.VENDOR
    flag = "--npu-smi"
    default_binary = "npu-smi"

    def collect(self, now: datetime) -> ParsedOutput:
        started = time.monotonic()
        table = self.runner.run(self.binary, ("info",)).require_success().stdout
        chips = ascend.parse_table(table)
        npus = sorted({chip.npu for chip in chips})
        results = self.runner.run_many(
            self.binary,
            [("info", "-t", "ecc", "-i", str(npu)) for npu in npus],
            max_parallel=MAX_PARALLEL,
            deadline_s=self.runner.timeout_s - (time.monotonic() - started),
        )
        reader = CellReader(ascend.UNKNOWN_WORDS)
        ecc = {npu: _ecc(npu, result, reader) for npu, result in zip(npus, results, strict=True)}
        return ascend.combine(chips, ecc, reader.anomalies)


def _ecc(
    npu: int, result: ToolResult | CollectError, reader: CellReader
) -> tuple[ascend.EccBlock, ...] | Failure:
    if isinstance(result, CollectError):
        return Failure(result.reason, f"NPU {npu}: {result}")
    try:
        return ascend.parse_ecc(result.require_success().stdout, npu, reader)
    except (CollectError, ParseError) as exc:
        return Failure(exc.reason, f"NPU {npu}: {exc}")
