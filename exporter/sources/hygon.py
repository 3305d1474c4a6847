"""Hygon DCU cards through ``hy-smi``: listed only (no proven health counter, see the parser)."""

from __future__ import annotations

from ..model import ParsedOutput
from ..parsers import hygon
from .base import TableSource


class HygonSource(TableSource):
    """``hy-smi``: device indices only."""

    vendor = hygon.VENDOR
    flag = "--hy-smi"
    default_binary = "hy-smi"

    def parse(self, text: str) -> ParsedOutput:
        return hygon.parse_table(text)
