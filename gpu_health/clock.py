"""Time helpers shared by both programs.

Everything inside the programs is an aware UTC ``datetime``. Components that need the time take
a ``Clock`` (a zero-argument callable) so tests inject one instead of sleeping or patching.
The store's columns are naive-UTC ``TIMESTAMP``; its one door (``evaluator/store/db.py``)
converts each statement's values and results with :func:`to_naive_utc` and
:func:`from_naive_utc`, and nothing else of the programs does.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_us(at: datetime) -> int:
    """Whole microseconds since the Unix epoch of an aware time (exact integer arithmetic:
    the grids of the backtest and the hourly boundaries are computed in these)."""
    return (at - EPOCH) // timedelta(microseconds=1)


def system_clock() -> datetime:
    """The real wall clock, aware UTC."""
    return datetime.now(UTC)


def to_naive_utc(value: datetime) -> datetime:
    """Aware (any zone) or naive-UTC datetime -> naive UTC, for DuckDB TIMESTAMP columns."""
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def from_naive_utc(value: datetime) -> datetime:
    """Naive UTC from DuckDB -> aware UTC."""
    if value.tzinfo is not None:
        return value.astimezone(UTC)
    return value.replace(tzinfo=UTC)


def rfc3339(value: datetime, timespec: str = "auto") -> str:
    """``2026-01-01T00:00:00Z``: UTC, ``Z`` suffix (a naive value is taken as naive UTC).

    ``timespec`` as for :meth:`datetime.isoformat` ("auto", "seconds", "milliseconds", ...).
    The one place the programs format a time for JSON, alerts and log text.
    """
    return from_naive_utc(value).isoformat(timespec=timespec).replace("+00:00", "Z")


def rfc3339_or_none(value: datetime | None) -> str | None:
    return None if value is None else rfc3339(value)
