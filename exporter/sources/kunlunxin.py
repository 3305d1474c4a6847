"""Kunlunxin cards through ``xpu-smi`` (third generation; ``xpu_smi`` for gen 1/2)."""

from __future__ import annotations

from ..model import ParsedOutput
from ..parsers import kunlunxin
from .base import TableSource


class KunlunxinSource(TableSource):
    """The no-argument ``xpu-smi`` table."""

    vendor = kunlunxin.VENDOR
    flag = "--xpu-smi"
    default_binary = "xpu-smi"

    def parse(self, text: str) -> ParsedOutput:
        return kunlunxin.parse_table(text)
