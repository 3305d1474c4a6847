"""Iluvatar CoreX cards through ``ixsmi -q -x``."""

from __future__ import annotations

from typing import ClassVar

from ..parsers import iluvatar
from .base import TableSource


class IluvatarSource(TableSource):
    """One ``ixsmi -q -x`` run covers every card."""

    vendor = iluvatar.VENDOR
    flag = "--ixsmi"
    default_binary = "ixsmi"
    args: ClassVar[tuple[str, ...]] = ("-q", "-x")
    parse = staticmethod(iluvatar.parse_xml)
