"""gpu_health's shared helpers: the one duration parser/formatter and the one time formatter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from gpu_health.clock import rfc3339, rfc3339_or_none
from gpu_health.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(60, 60.0), (0.5, 0.5), ("60s", 60.0), ("5m", 300.0), ("1h", 3600.0), ("1h30m", 5400.0),
     ("500ms", 0.5), ("1d", 86400.0), ("2w", 1209600.0), ("1.5m", 90.0), ("0.5s", 0.5),
     ("0s", None), (0, None), (-5, None), ("5", None), ("m", None), ("5m1h", None),
     (True, None), (None, None), ("", None), (float("inf"), None), ("-1s", None),
     ("1e3s", None), ("90 s", None)],
)
def test_config_file_durations(value: object, seconds: float | None) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("1.5", 1.5), ("0", None),
                                               ("90s", 90.0), ("1h30m", 5400.0)])
def test_flag_durations_may_omit_the_unit(text: str, seconds: float | None) -> None:
    assert parse_duration(text, unitless=True) == seconds


@pytest.mark.parametrize(("seconds", "text"), [(259200, "72h"), (300, "5m"), (90, "90s"),
                                               (3600, "1h"), (61, "61s")])
def test_format_duration(seconds: int, text: str) -> None:
    assert format_duration(timedelta(seconds=seconds)) == text


def test_rfc3339_is_utc_with_z_whatever_the_input_zone() -> None:
    at = datetime(2026, 1, 1, 13, 0, 0, 250000, tzinfo=timezone(timedelta(hours=1)))
    assert rfc3339(at) == "2026-01-01T12:00:00.250000Z"
    assert rfc3339(at, "milliseconds") == "2026-01-01T12:00:00.250Z"
    assert rfc3339(at, "seconds") == "2026-01-01T12:00:00Z"
    assert rfc3339(datetime(2026, 1, 1)) == "2026-01-01T00:00:00Z"  # naive is naive UTC
    assert rfc3339_or_none(None) is None
    assert rfc3339_or_none(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00Z"
