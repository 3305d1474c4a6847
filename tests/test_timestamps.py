"""The one timestamp parser: RFC 3339 with an offset or Unix seconds, exact to the
microsecond, nothing zone-less; the API, event files and ``simulate --end`` all use it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_health.clock import rfc3339
from gpu_health.errors import ApiError
from gpu_health.evaluator.backtest.events import parse_time as event_time
from gpu_health.evaluator.http.api.query_params import parse_time as api_time
from gpu_health.timestamps import parse_timestamp

aware = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30),
                     timezones=st.sampled_from([UTC, timezone(timedelta(hours=8)),
                                                timezone(timedelta(hours=-5, minutes=-30))]))


@given(aware)
def test_what_we_format_reads_back_exactly(at: datetime) -> None:
    assert parse_timestamp(rfc3339(at)) == at
    assert parse_timestamp(at.isoformat()) == at


@given(st.integers(0, 10**11), st.integers(0, 999_999))
def test_unix_seconds_read_to_the_microsecond(seconds: int, micros: int) -> None:
    expected = datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)
    assert parse_timestamp(f"{seconds}.{micros:06d}") == expected


@pytest.mark.parametrize("text", ["2026-03-01T00:00:00", "2026-03-01", "1e9", "-5", "nan",
                                  "2026-03-01T00:00:00+0100", " 1650690000", "１２３"])
def test_anything_else_is_refused_with_a_message_that_does_not_quote_it(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_timestamp(text)
    assert text.strip() not in str(caught.value)


def test_the_callers_agree() -> None:
    for text in ("2026-03-01T01:00:00+01:00", "1772323200", "2026-03-01t00:00:00z"):
        assert api_time("since", text) == event_time(f" {text} ") == datetime(2026, 3, 1,
                                                                             tzinfo=UTC)
    assert event_time("2026-03-01T00:00:00") is None
    with pytest.raises(ApiError):
        api_time("since", "2026-03-01T00:00:00")
