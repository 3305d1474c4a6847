"""The one timestamp parser (the API, the backtest's event files and ``simulate
--end`` each had their own, accepting different forms).

Accepted, and nothing else:
- RFC 3339 with an explicit offset: ``2026-01-31T08:00:00Z``, ``...+08:00``, a fraction of up
  to 9 digits (microseconds kept), ``t``/``z`` in lower case, a space instead of ``T``, and a
  space instead of ``+`` before the offset (what an unencoded ``+`` in a query string decodes
  to; unambiguous, as a negative offset keeps its ``-``);
- Unix seconds: 1 to 12 digits, optionally a fraction of up to 9 digits.
A time without an offset is refused: it would silently mean server-local or UTC depending on
who reads it. Surrounding whitespace is the caller's to strip.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

_UNIX: Final = re.compile(r"([0-9]{1,12})(?:\.([0-9]{1,9}))?")
_RFC3339: Final = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+\- ]\d{2}:\d{2})",
    re.ASCII,  # \d would otherwise accept any Unicode digit
)
EXPECTED: Final = "expected RFC 3339 with an offset (2026-01-31T08:00:00Z) or Unix seconds"


def parse_timestamp(text: str) -> datetime:
    """``text`` as an aware UTC datetime; ValueError with a message that never quotes it."""
    unix = _UNIX.fullmatch(text)
    if unix:
        seconds, fraction = int(unix.group(1)), (unix.group(2) or "").ljust(6, "0")[:6]
        try:
            return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=int(fraction))
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError("Unix time out of range") from exc
    match = _RFC3339.fullmatch(text)
    if not match:
        raise ValueError(EXPECTED)
    date, clock, fraction, offset = match.groups()
    offset = "+00:00" if offset in ("Z", "z") else offset.replace(" ", "+")
    micro = f".{fraction.ljust(6, '0')[:6]}" if fraction else ""
    try:
        value = datetime.fromisoformat(f"{date}T{clock}{micro}{offset}")
    except ValueError as exc:
        raise ValueError("not a valid date-time") from exc
    return value.astimezone(UTC)
