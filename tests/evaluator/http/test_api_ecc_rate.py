"""Hourly ECC increases: the reference's three conditions (fresh boundaries, same UUID,
non-negative) each make an hour null with a reason; coverage counts only computable hours.
Pure function tests first, then the endpoint against the real server and DuckDB."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpu_health.evaluator.stats.ecc_rate import coverage, hourly_increases
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.statistics.api_queries import Boundary
from tests.evaluator.api_support import add_node, add_samples, get_json, make_ctx, sample, serve

ECC_RATE = "/api/v1/gpu-health/ecc-rate"
H0 = datetime(2026, 1, 10, tzinfo=UTC)
STALL = timedelta(minutes=60)


def _b(hour: int, minutes_old: int | None, uuid: str | None = "A", corr: int | None = 0,
       unc: int | None = 0) -> Boundary:
    at = H0 + timedelta(hours=hour)
    if minutes_old is None:
        return Boundary(at, None, None, None, None)
    return Boundary(at, at - timedelta(minutes=minutes_old), uuid, corr, unc)


def test_pure_three_conditions() -> None:
    hours = hourly_increases(
        [_b(0, 1, corr=10), _b(1, 60, corr=12),   # fresh at exactly the threshold: +2
         _b(2, 61, corr=12),                       # stale end
         _b(3, 5, corr=20), _b(4, 5, uuid="B", corr=21),  # swapped card
         _b(5, 5, uuid="B", corr=3, unc=None),     # decreased / unknown
         _b(6, None)],                             # nothing at all
        stall=STALL,
    )
    table = [(h.increases["ecc_corrected_total"].value, h.increases["ecc_corrected_total"].reason,
              h.increases["ecc_uncorrected_total"].reason) for h in hours]
    assert table == [
        (2, None, None),
        (None, "stale_or_missing", "stale_or_missing"),
        (None, "stale_or_missing", "stale_or_missing"),
        (None, "uuid_changed", "uuid_changed"),
        (None, "counter_decreased", "unknown_value"),
        (None, "stale_or_missing", "stale_or_missing"),
    ]
    cov = coverage(hours)
    assert cov["ecc_corrected_total"].computable_hours == 1
    assert cov["ecc_corrected_total"].total_hours == 6
    assert cov["ecc_corrected_total"].sum_increase == 2


def test_pure_cards_without_uuid_and_empty_coverage() -> None:
    hours = hourly_increases([_b(0, 1, uuid=None, unc=None), _b(1, 1, uuid=None, unc=None)],
                             stall=STALL)
    assert hours[0].increases["ecc_corrected_total"].value == 0  # a known zero stays 0
    assert hours[0].increases["ecc_uncorrected_total"].reason == "unknown_value"
    assert coverage(hours)["ecc_uncorrected_total"].sum_increase is None  # not 0
    assert hourly_increases([_b(0, 1)], stall=STALL) == ()


def _db(tmp_path: Path) -> Database:
    db = DuckDBDatabase(tmp_path / "ecc.duckdb")
    add_node(db, "e1", "a")

    def at(hour: int, minute: int) -> datetime:
        return H0 + timedelta(hours=hour, minutes=minute)

    add_samples(db, [
        sample("e1", 0, at(-1, 58), uuid="A", ecc_corrected_total=10, ecc_uncorrected_total=0),
        sample("e1", 0, at(0, 58), uuid="A", ecc_corrected_total=15, ecc_uncorrected_total=0),
        # nothing from 00:58 to 02:59: the 02:00 boundary is 62 minutes old
        sample("e1", 0, at(2, 59), uuid="A", ecc_corrected_total=20, ecc_uncorrected_total=0),
        sample("e1", 0, at(3, 59), uuid="B", ecc_corrected_total=1, ecc_uncorrected_total=0),
        sample("e1", 0, at(4, 59), uuid="B", ecc_corrected_total=0, ecc_uncorrected_total=None),
        sample("e1", 0, at(5, 59), uuid="B", ecc_corrected_total=3, ecc_uncorrected_total=1),
        sample("e1", 0, at(4, 30), uuid="A", source="simulated", ecc_corrected_total=999),
    ])
    return db


async def test_endpoint_hours_and_coverage(tmp_path: Path) -> None:
    db = _db(tmp_path)
    async with serve(make_ctx(db)) as client:
        body = await get_json(client, ECC_RATE, {
            "node_id": "e1", "gpu_index": "0",
            "since": "2026-01-10T00:30:00Z", "until": "2026-01-10T06:45:00Z"})
        empty = await get_json(client, ECC_RATE, {"node_id": "e1", "gpu_index": "9"})
        too_long = await get_json(client, ECC_RATE, {
            "node_id": "e1", "gpu_index": "0", "since": "2020-01-01T00:00:00Z"}, expect=400)
    db.close()
    assert body["since"] == "2026-01-10T00:00:00Z" and body["until"] == "2026-01-10T06:00:00Z"
    rows = [(h["start"][11:16], h["ecc_corrected_total"]["increase"],
             h["ecc_corrected_total"]["reason"], h["ecc_uncorrected_total"]["increase"],
             h["ecc_uncorrected_total"]["reason"]) for h in body["hours"]]
    assert rows == [
        ("00:00", 5, None, 0, None),
        ("01:00", None, "stale_or_missing", None, "stale_or_missing"),
        ("02:00", None, "stale_or_missing", None, "stale_or_missing"),
        ("03:00", None, "uuid_changed", None, "uuid_changed"),
        ("04:00", None, "counter_decreased", None, "unknown_value"),
        ("05:00", 3, None, None, "unknown_value"),
    ]
    assert body["coverage"] == {
        "ecc_corrected_total": {"computable_hours": 2, "total_hours": 6, "sum_increase": 8},
        "ecc_uncorrected_total": {"computable_hours": 1, "total_hours": 6, "sum_increase": 0},
    }
    assert len(empty["hours"]) == 7 * 24
    assert empty["coverage"]["ecc_corrected_total"]["sum_increase"] is None
    assert {h["ecc_corrected_total"]["reason"] for h in empty["hours"]} == {"stale_or_missing"}
    assert too_long["param"] == "since"


async def test_endpoint_simulated_is_separate(tmp_path: Path) -> None:
    db = _db(tmp_path)
    async with serve(make_ctx(db)) as client:
        body = await get_json(client, ECC_RATE, {
            "node_id": "e1", "gpu_index": "0", "source": "simulated",
            "since": "2026-01-10T04:00:00Z", "until": "2026-01-10T06:00:00Z"})
    db.close()
    # One simulated row at 04:30: fresh at 05:00, nothing at 04:00; 06:00 is 90 minutes later.
    assert [h["ecc_corrected_total"]["reason"] for h in body["hours"]] == [
        "stale_or_missing", "stale_or_missing"]
