"""gpu_health's shared helpers: the one duration parser/formatter and the one time formatter."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_health import logformat
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


# -- gpu_health.logformat -------------------------------------------------------------------------

def _record(msg: str, level: int = logging.INFO, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise ValueError("bad\nvalue")
        except ValueError:
            info = sys.exc_info()
    record = logging.LogRecord("evaluator.x", level, __file__, 1, msg, (), info)
    record.created = 1_767_225_600.25  # 2026-01-01T00:00:00.250Z
    record.msecs = 250.0
    return record


def test_logfmt_quotes_what_needs_it_and_keeps_one_line() -> None:
    fmt = logformat.formatter("logfmt")
    assert fmt.format(_record("plain")) == \
        "ts=2026-01-01T00:00:00.250Z level=info logger=evaluator.x msg=plain"
    line = fmt.format(_record('a "b"\nc\\d', logging.WARNING))
    assert line.endswith(r'level=warn logger=evaluator.x msg="a \"b\"\nc\\d"')
    failed = fmt.format(_record("boom", logging.ERROR, exc=True))
    assert "\n" not in failed and "level=error" in failed
    assert 'err="Traceback' in failed and r"ValueError: bad\nvalue" in failed


def test_json_has_the_same_keys() -> None:
    doc = json.loads(logformat.formatter("json").format(_record("x", logging.DEBUG, exc=True)))
    assert doc["ts"] == "2026-01-01T00:00:00.250Z" and doc["level"] == "debug"
    assert doc["logger"] == "evaluator.x" and doc["msg"] == "x" and "ValueError" in doc["err"]


@given(st.text(max_size=200))
def test_logfmt_never_breaks_a_line(message: str) -> None:
    assert "\n" not in logformat.formatter("logfmt").format(_record(message))


def test_level_names_follow_the_exporter_toolkit() -> None:
    assert [logformat.level_number(n) for n in ("debug", "INFO", "warn", "warning", "error")] \
        == [logging.DEBUG, logging.INFO, logging.WARNING, logging.WARNING, logging.ERROR]
    assert logformat.level_number("loud") is None
