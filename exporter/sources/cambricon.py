"""Cambricon cards through ``cnmon``."""

from __future__ import annotations

from ..model import ParsedOutput
from ..parsers import cambricon
from .base import TableSource


class CambriconSource(TableSource):
    """The no-argument ``cnmon`` table."""

    vendor = cambricon.VENDOR
    flag = "--cnmon"
    default_binary = "cnmon"

    def parse(self, text: str) -> ParsedOutput:
        return cambricon.parse_table(text)
