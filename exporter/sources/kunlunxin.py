"""Kunlunxin cards through ``xpu-smi`` (third generation; ``xpu_smi`` for gen 1/2).

Preferred: ``xpu-smi -q -x`` (XML), which carries the correctable AND uncorrectable aggregate
DRAM ECC counts and the UUID, so Kunlunxin cards become eligible for the growth rule. When the
tool does not answer ``-q -x`` with XML (a non-zero exit, or other text: gen-2 ``xpu_smi`` has
no such mode), the no-argument table is read instead (``Volatile Uncorr. ECC`` only), and
``-q -x`` is not tried again for 30 minutes, so such a node costs one process per tick.

Intel's xpu-smi has the same name. Its output is recognised (help, ``Device ID`` tables, JSON)
and the tick fails with reason ``foreign_tool``: no Kunlunxin metric is ever made from it. On
an Intel node, pass ``--xpu-smi ''`` to switch the vendor off.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from gpu_health.errors import CollectError
from gpu_health.runner import ToolResult, ToolRunner

from ..parsers import kunlunxin, kunlunxin_xml
from ..tool_output import ParsedOutput
from .base import COMMON_ERROR_REASONS, VendorSource

log = logging.getLogger(__name__)

XML_RETRY_AFTER = timedelta(minutes=30)
XML_ARGS = ("-q", "-x")


class KunlunxinSource(VendorSource):
    """``xpu-smi -q -x`` when it answers with XML, else the no-argument table."""

    vendor = kunlunxin.VENDOR
    flag = "--xpu-smi"
    default_binary = "xpu-smi"
    error_reasons = (*COMMON_ERROR_REASONS, "foreign_tool")

    def __init__(
        self, binary: str, runner: ToolRunner, *, xml_retry_after: timedelta = XML_RETRY_AFTER
    ) -> None:
        super().__init__(binary, runner)
        self.xml_retry_after = xml_retry_after
        self._xml_refused_at: datetime | None = None

    def collect(self, now: datetime) -> ParsedOutput:
        if self._try_xml(now):
            result = self.runner.run(self.binary, XML_ARGS)
            if result.returncode == 0 and kunlunxin_xml.looks_like_xml(result.stdout):
                return kunlunxin_xml.parse_xml(result.stdout)
            _refuse_foreign(result)
            log.info("%s does not answer -q -x with XML (status %d); reading its table for "
                     "the next %s", self.binary, result.returncode, self.xml_retry_after)
            self._xml_refused_at = now
        result = self.runner.run(self.binary, ())
        _refuse_foreign(result)
        return kunlunxin.parse_table(result.require_success().stdout)

    def _try_xml(self, now: datetime) -> bool:
        refused = self._xml_refused_at
        return refused is None or not timedelta(0) <= now - refused < self.xml_retry_after


def _refuse_foreign(result: ToolResult) -> None:
    if kunlunxin_xml.is_intel_output(result.stdout + "\n" + result.stderr_tail):
        raise CollectError(
            f"{result.argv[0]} is Intel's xpu-smi, not Kunlunxin's; pass --xpu-smi '' on "
            "Intel nodes (or the path of Kunlunxin's tool)", reason="foreign_tool")
