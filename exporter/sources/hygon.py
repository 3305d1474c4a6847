"""Hygon DCU cards through ``hy-smi``: listed only (no proven health counter, see the parser)."""

from __future__ import annotations

from ..parsers import hygon
from .base import TableSource


class HygonSource(TableSource):
    """``hy-smi``: device indices only."""

    vendor = hygon.VENDOR
    flag = "--hy-smi"
    default_binary = "hy-smi"
    parse = staticmethod(hygon.parse_table)
