"""The time split of a calibration (pure): train on the earlier part, judge on the later one.

A prediction belongs to the part that holds its t0, a fault to the part it happens in. The train
part is read as it was known at its end: its statistics count an outcome only when it was
decided by then (``raw_stats(as_of=...)``), so a window that runs into the test part is still
pending there and no test-part fault reaches the choice. The split falls on a tick of the
replay grid, so "decided by the split" means the same tick-by-tick as in a live worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gpu_health.clock import rfc3339
from gpu_health.evaluator.backtest.activity import tick_at_or_before

_US = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Part:
    name: str
    since: datetime
    until: datetime  # inclusive
    as_of: datetime | None  # outcomes decided after this count as pending

    def as_dict(self, first_faults: int | None) -> dict[str, Any]:
        return {"since": rfc3339(self.since), "until": rfc3339(self.until),
                "first_faults": first_faults}


@dataclass(frozen=True, slots=True)
class Split:
    since: datetime
    at: datetime  # the first instant of the test part (a tick)
    until: datetime
    fraction: float

    @property
    def train(self) -> Part:
        end = self.at - _US
        return Part("train", self.since, end, end)

    @property
    def test(self) -> Part:
        return Part("test", self.at, self.until, None)


def split_period(since: datetime, until: datetime, fraction: float,
                 tick: timedelta) -> Split:
    """``fraction`` of ``[since, until]`` for training, the split floored to the tick grid
    (ticks are multiples of ``tick`` from the Unix epoch, as the replay's)."""
    if not 0 < fraction < 1:
        raise ValueError(f"the train fraction must be strictly between 0 and 1, got {fraction}")
    at = tick_at_or_before(since + (until - since) * fraction, tick)
    if not since < at < until:
        raise ValueError(f"the split {at.isoformat()} falls outside the period "
                         f"{since.isoformat()} .. {until.isoformat()}")
    return Split(since, at, until, fraction)
