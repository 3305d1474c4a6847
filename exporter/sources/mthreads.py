"""Moore Threads cards through ``mthreads-gmi``: listed only (no proven health counter, see
the parser)."""

from __future__ import annotations

from ..parsers import mthreads
from .base import TableSource


class MooreThreadsSource(TableSource):
    """``mthreads-gmi``: names and bus ids."""

    vendor = mthreads.VENDOR
    flag = "--mthreads-gmi"
    default_binary = "mthreads-gmi"
    parse = staticmethod(mthreads.parse_table)
