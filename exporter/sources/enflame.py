"""Enflame cards through ``efsmi -q``: listed only (no proven health counter, see the parser)."""

from __future__ import annotations

from typing import ClassVar

from ..parsers import enflame
from .base import TableSource


class EnflameSource(TableSource):
    """``efsmi -q``: names and UUIDs."""

    vendor = enflame.VENDOR
    flag = "--efsmi"
    default_binary = "efsmi"
    args: ClassVar[tuple[str, ...]] = ("-q",)
    parse = staticmethod(enflame.parse_query)
