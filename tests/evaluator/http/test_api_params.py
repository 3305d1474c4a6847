"""Pure parameter parsing: strict integers, RFC 3339 / Unix times, sources, unknown names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpu_health.errors import ApiError
from gpu_health.evaluator.http.api.query_params import Query, parse_int, parse_time

NOW = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def _refused(param: str) -> pytest.RaisesExc[ApiError]:
    return pytest.raises(ApiError, match=f"^{param}")


@pytest.mark.parametrize("raw", ["1.0", "01", "01x", "-1", "+1", " 1", "1e3", "", "0x10", "١"])
def test_integers_are_strict(raw: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_int("limit", raw)
    assert err.value.status == 400 and err.value.param == "limit"


def test_integer_bounds() -> None:
    assert parse_int("limit", "500", minimum=1, maximum=500) == 500
    assert parse_int("offset", "0") == 0
    for raw in ("0", "501", "99999999999999999999"):
        with _refused("limit"):
            parse_int("limit", raw, minimum=1, maximum=500)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-01-10T12:00:00Z", NOW),
        ("2026-01-10t12:00:00z", NOW),
        ("2026-01-10T20:00:00+08:00", NOW),
        ("2026-01-10T20:00:00 08:00", NOW),  # '+' decoded to ' ' by an unencoded query string
        ("2026-01-10T07:00:00-05:00", NOW),
        ("2026-01-10 12:00:00Z", NOW),
        ("2026-01-10T12:00:00.5Z", NOW + timedelta(milliseconds=500)),
        ("2026-01-10T12:00:00.123456789Z", NOW + timedelta(microseconds=123456)),
        (str(int(NOW.timestamp())), NOW),
        (f"{int(NOW.timestamp())}.25", NOW + timedelta(milliseconds=250)),
    ],
)
def test_times(raw: str, expected: datetime) -> None:
    value = parse_time("since", raw)
    assert value == expected and value.tzinfo is UTC


@pytest.mark.parametrize(
    "raw",
    ["2026-01-10T12:00:00", "2026-01-10", "yesterday", "2026-13-01T00:00:00Z",
     "2026-01-10T25:00:00Z", "-5", "1e9", "2026-01-10T12:00:00+0800", "999999999999"],
)
def test_bad_times_name_the_parameter(raw: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_time("until", raw)
    assert err.value.status == 400 and err.value.param == "until"


def test_unknown_and_repeated_parameters() -> None:
    with pytest.raises(ApiError) as err:
        Query.parse([("limt", "5"), ("node_id", "n1"), ("zzz", "1")], {"node_id", "limit"})
    assert err.value.param == "limt" and "limt" in str(err.value) and "zzz" in str(err.value)
    with _refused("node_id"):
        Query.parse([("node_id", "a"), ("node_id", "b")], {"node_id"})


def test_source_only_real_or_simulated() -> None:
    assert Query.parse([], {"source"}).source() == "real"
    assert Query.parse([("source", "simulated")], {"source"}).source() == "simulated"
    for raw in ("all", "REAL", "", "real,simulated"):
        with _refused("source"):
            Query.parse([("source", raw)], {"source"}).source()


def test_status_choices() -> None:
    assert Query.parse([("status", "voided")], {"status"}).status() == "voided"
    with _refused("status"):
        Query.parse([("status", "open")], {"status"}).status()


def test_required_and_empty_values() -> None:
    q = Query.parse([("node_id", "")], {"node_id", "gpu_index"})
    with _refused("node_id"):
        q.required_text("node_id")
    with _refused("gpu_index"):
        q.required_integer("gpu_index")
    with _refused("node_id"):
        Query.parse([("node_id", "x" * 257)], {"node_id"}).text("node_id")


def test_time_range_defaults_and_order() -> None:
    q = Query.parse([], {"since", "until"})
    assert q.time_range(NOW, timedelta(days=7)) == (NOW - timedelta(days=7), NOW)
    assert q.open_time_range(NOW) == (None, NOW)
    until_only = Query.parse([("until", "2026-01-01T00:00:00Z")], {"since", "until"})
    since, until = until_only.time_range(NOW, timedelta(days=7))
    assert until - since == timedelta(days=7) and until < NOW
    backwards = Query.parse([("since", "2026-01-02T00:00:00Z"), ("until", "2026-01-01T00:00:00Z")],
                            {"since", "until"})
    with _refused("since"):
        backwards.time_range(NOW, timedelta(days=7))
