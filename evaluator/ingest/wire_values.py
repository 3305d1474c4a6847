"""Numbers as an exporter writes them on the wire: counter values, times in seconds, state
sets and whole-number labels.

Pure, no I/O. A counter value that is NaN, +/-Inf, negative, non-integer or above 2**63-1 (the
store's BIGINT column) is unknown (None) with the reason, never 0.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TypeVar

MAX_COUNTER = 2**63 - 1
MAX_GPU_INDEX = 2**31 - 1  # the store's gpu_index column is INTEGER
MAX_XID = 2**31 - 1  # the store's xid column is INTEGER

T = TypeVar("T")
Parsed = tuple[int | None, str | None]  # a value, or None and the reason it is unknown
Values = Callable[[str], Parsed]


def counter_value(text: str) -> Parsed:
    """A counter value as written on the wire -> (value, None) or (None, reason it is unknown).

    Plain digit strings are converted exactly with ``int`` (a float would round values above
    2**53); everything else goes through ``float`` first.
    """
    if text.isascii() and text.isdigit():
        number = int(text)
        return (number, None) if number <= MAX_COUNTER else (None, "too_large")
    # prometheus_client writes values as floats ("3.0"): up to 15 digits, exact without float
    if text.endswith(".0") and 2 < len(text) <= 17 and text.isascii() and text[:-2].isdigit():
        return int(text[:-2]), None
    value = float(text)
    reason = _no_count(value) or ("non_integer" if not value.is_integer() else None)
    if reason is not None:
        return None, reason
    if value > MAX_COUNTER:
        return None, "too_large"
    return int(value), None


def seconds_as_micros(text: str) -> Parsed:
    """A time in seconds as written on the wire -> whole microseconds (the unit the driver
    counts in, which the exporter divides by 10**6), or (None, reason it is unknown)."""
    return micros(float(text))  # the exposition parser has checked the text is a number


def micros(seconds: float) -> Parsed:
    """A time in seconds as whole microseconds, or (None, reason it is unknown)."""
    reason = _no_count(seconds)
    if reason is not None:
        return None, reason
    value = round(seconds * 1e6)
    return (value, None) if value <= MAX_COUNTER else (None, "too_large")


def _no_count(value: float) -> str | None:
    """Why a number cannot be a count or a time (NaN, infinite, negative), else None."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    return "negative" if value < 0 else None


def state_index(values: Mapping[str, int | None], known: tuple[str, ...]) -> int | None:
    """A state set (one value per state, 1 for the current one) as the index in ``known`` of
    its current state; None unless exactly one known state reads 1 and every other reads 0."""
    current = [state for state, v in values.items() if v == 1]
    if len(current) != 1 or current[0] not in known \
            or any(v not in (0, 1) for v in values.values()):
        return None
    return known.index(current[0])


def whole_number(text: str, limit: int) -> int | None:
    """A label such as ``gpu`` or ``xid`` as a number: plain ASCII digits up to ``limit``."""
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if number <= limit else None


def value_memo() -> Values:
    """counter_value remembered per text, for one answer: it repeats a handful of values
    ("0.0", "1.0")."""
    return functools.cache(counter_value)


def keep_count(counts: dict[T, int | None], duplicates: set[T], key: T, parsed: Parsed,
               unknown: Counter[str]) -> None:
    """Note ``key``'s count (an XID's, an SXid series'): a second series of one key leaves the
    key out, counted as ``duplicate`` (which of them is true cannot be decided); an unknown
    value is kept as None and counted by its reason."""
    if key in counts or key in duplicates:
        duplicates.add(key)
        counts.pop(key, None)
        unknown["duplicate"] += 1
        return
    value, reason = parsed
    if reason is not None:
        unknown[reason] += 1
    counts[key] = value
