"""Cambricon cards through ``cnmon``."""

from __future__ import annotations

from ..parsers import cambricon
from .base import TableSource


class CambriconSource(TableSource):
    """The no-argument ``cnmon`` table."""

    vendor = cambricon.VENDOR
    flag = "--cnmon"
    default_binary = "cnmon"
    parse = staticmethod(cambricon.parse_table)
