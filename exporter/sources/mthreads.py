"""Moore Threads cards through ``mthreads-gmi``: listed only (no proven health counter, see
the parser)."""

from __future__ import annotations

from ..model import ParsedOutput
from ..parsers import mthreads
from .base import TableSource


class MooreThreadsSource(TableSource):
    """``mthreads-gmi``: names and bus ids."""

    vendor = mthreads.VENDOR
    flag = "--mthreads-gmi"
    default_binary = "mthreads-gmi"

    def parse(self, text: str) -> ParsedOutput:
        return mthreads.parse_table(text)
