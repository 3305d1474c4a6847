"""Which steps one live cycle reads (pure: the cursor and ``now`` in, a window out).

Every timestamp is on the step grid counted from the Unix epoch, so two evaluators reading one
Prometheus see the same timestamps and make the same prediction ids. A cycle reads the steps
after the last one it read, up to ``now - lag`` (samples arrive late: a scrape in flight, remote
write queues, a Thanos sidecar's upload). After an outage it catches up over at most
``max_catchup``; older steps are given up (``skipped``), so the gap stays a gap in the store
instead of a cycle that never ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def aligned(at: datetime, step: timedelta) -> datetime:
    """``at`` rounded up onto the ``step`` grid from the Unix epoch."""
    n = -(-(at - EPOCH) // step)
    return EPOCH + n * step


def floored(at: datetime, step: timedelta) -> datetime:
    """``at`` rounded down onto the ``step`` grid from the Unix epoch."""
    return EPOCH + ((at - EPOCH) // step) * step


@dataclass(frozen=True, slots=True)
class Window:
    """Read ``[start, end]`` (both on the grid); ``skipped`` steps were older than the bound."""

    start: datetime
    end: datetime
    step: timedelta
    skipped: tuple[datetime, datetime] | None = None

    @property
    def steps(self) -> int:
        return (self.end - self.start) // self.step + 1


def next_window(cursor: datetime | None, now: datetime, *, step: timedelta, lag: timedelta,
                max_catchup: timedelta) -> Window | None:
    """The steps after ``cursor`` (the last step read; None: nothing read yet) up to
    ``now - lag``, at most ``max_catchup`` of them; None when no new step is due."""
    end = floored(now - lag, step)
    start = end if cursor is None else floored(cursor, step) + step
    if start > end:
        return None
    earliest = end - (max(1, max_catchup // step) - 1) * step
    if start < earliest:
        return Window(earliest, end, step, (start, earliest - step))
    return Window(start, end, step)
