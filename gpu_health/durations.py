"""Durations: the one parser (config files, command-line flags) and the one formatter.

Accepted forms, as an SRE running Prometheus writes them:

- a number of seconds (``60``, ``0.5``) where the value is already a number (YAML);
- Prometheus duration syntax, units in decreasing order and each at most once (``1h30m``,
  ``90s``, ``500ms``, ``1d``, ``2w``, ``1y``);
- one decimal with a unit (``1.5m``, ``0.5s``), which flags of the exporter have always taken;
- a bare decimal string (``"90"``) only where ``unitless`` says so (command-line flags whose
  unit is documented as seconds); in a config file ``"5"`` is a typo for ``5m`` or ``5s``.

Zero, negative and infinite durations are refused (None): every duration here is an interval
or a timeout, and a zero one would spin or never wait.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Final

_PROMETHEUS: Final = re.compile(
    r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?"
)
_PROMETHEUS_UNITS: Final = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)
_DECIMAL: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)?")
_DECIMAL_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object, *, unitless: bool = False) -> float | None:
    """Seconds from a number or a duration string; None when it is neither, or not > 0."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds: float | None = float(value)
    elif isinstance(value, str) and value.strip():
        seconds = _parse_text(value.strip(), unitless)
    else:
        return None
    if seconds is None or not 0 < seconds < math.inf:
        return None
    return seconds


def _parse_text(text: str, unitless: bool) -> float | None:
    match = _PROMETHEUS.fullmatch(text)
    if match is not None and any(match.groups()):
        return float(sum(int(g) * unit for g, unit in
                         zip(match.groups(), _PROMETHEUS_UNITS, strict=True) if g))
    decimal = _DECIMAL.fullmatch(text)
    if decimal is None or (decimal.group(2) is None and not unitless):
        return None
    return float(decimal.group(1)) * _DECIMAL_UNITS.get(decimal.group(2) or "s", 1.0)


def format_duration(value: timedelta) -> str:
    """The shortest whole unit: ``72h``, ``5m``, ``90s`` (for messages and alert text)."""
    seconds = int(value.total_seconds())
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
