"""The time split: on the tick grid, train read as of its end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpu_health.evaluator.calibrate.split import split_period

SINCE = datetime(2026, 1, 1, 0, 7, tzinfo=UTC)
UNTIL = SINCE + timedelta(days=100)


def test_split_falls_on_a_tick_and_the_parts_do_not_overlap() -> None:
    split = split_period(SINCE, UNTIL, 0.6, timedelta(minutes=30))
    assert split.at == datetime(2026, 3, 2, 0, 0, tzinfo=UTC)  # 60 days + 7 min, floored
    train, test = split.train, split.test
    assert (train.since, test.until) == (SINCE, UNTIL)
    assert train.until == split.at - timedelta(microseconds=1) == train.as_of
    assert test.since == split.at and test.as_of is None


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_fraction_must_leave_two_parts(fraction: float) -> None:
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        split_period(SINCE, UNTIL, fraction, timedelta(minutes=30))


def test_a_split_that_floors_out_of_the_period_is_refused() -> None:
    with pytest.raises(ValueError, match="outside the period"):
        split_period(SINCE, SINCE + timedelta(minutes=20), 0.1, timedelta(minutes=30))
