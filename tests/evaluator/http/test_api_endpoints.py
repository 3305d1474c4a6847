"""Predictions, capabilities and samples against the real server and a real DuckDB file; every
body is validated against the served OpenAPI document (api_support.get_json)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from gpu_health.contract import COUNTER_KEYS
from gpu_health.evaluator.model import XidKey, XidSample
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.cycles import write_cycle
from tests.conftest import STORE_ENGINES, open_store
from tests.evaluator.api_support import (
    NOW,
    RULE_VERSION,
    build_dataset,
    check_against_doc,
    get_json,
    make_ctx,
    serve,
)

PREDICTIONS = "/api/v1/gpu-health/predictions"
CAPABILITIES = "/api/v1/gpu-health/capabilities"
SAMPLES = "/api/v1/gpu-health/samples"


@pytest.fixture(scope="module", params=STORE_ENGINES)
def db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    database = open_store(request, request.param, tmp_path_factory.mktemp("endpoints"), "api")
    build_dataset(database)
    # XID counts for n1/0 (and a simulated n1/1 row, and an n3/1 row dated after NOW: neither
    # makes a real card XID-collectable now)
    write_cycle(database, [], xids=[
        XidSample(XidKey("n1", 0, "real", 48), "GPU-n1-0", NOW - timedelta(days=1), 0),
        XidSample(XidKey("n1", 1, "simulated", 48), None, NOW - timedelta(days=1), 0),
        XidSample(XidKey("n3", 1, "real", 48), "GPU-n3-1", NOW + timedelta(minutes=5), 0),
    ])
    yield database
    database.close()


async def test_predictions_newest_first_with_frozen_versions(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        body = await get_json(client, PREDICTIONS)
    assert [p["id"] for p in body["items"]] == ["p-n1-pending", "p-n3-voided", "p-n2-miss",
                                                "p-n1-hit"]
    assert body["total"] == 4 and body["limit"] == 100 and body["offset"] == 0
    assert body["current_rule_version"] == RULE_VERSION and body["source"] == "real"
    by_id = {p["id"]: p for p in body["items"]}
    assert by_id["p-n2-miss"]["rule_version"] == "v0-old"
    assert by_id["p-n1-pending"]["uncorrected_at_t0"] is None  # unknown stays null
    assert by_id["p-n3-voided"]["gpu_uuid"] is None
    assert by_id["p-n1-hit"]["t0"] == "2026-01-01T12:00:00Z"


@pytest.mark.parametrize(
    ("params", "ids"),
    [
        ({"status": "hit"}, ["p-n1-hit"]),
        ({"node_id": "n1"}, ["p-n1-pending", "p-n1-hit"]),
        ({"node_id": "n1", "gpu_index": "1"}, []),
        ({"gpu_index": "0", "status": "miss"}, ["p-n2-miss"]),
        ({"since": "2026-01-02T00:00:00Z"}, ["p-n1-pending", "p-n3-voided", "p-n2-miss"]),
        ({"until": "2026-01-02T12:00:00Z"}, ["p-n2-miss", "p-n1-hit"]),
        ({"until": str(int((NOW - timedelta(days=8)).timestamp()))}, ["p-n2-miss", "p-n1-hit"]),
        ({"source": "simulated"}, ["p-sim"]),
        ({"limit": "2", "offset": "1"}, ["p-n3-voided", "p-n2-miss"]),
        ({"offset": "10"}, []),
    ],
)
async def test_prediction_filters(db: Database, params: dict[str, str], ids: list[str]) -> None:
    async with serve(make_ctx(db)) as client:
        body = await get_json(client, PREDICTIONS, params)
    assert [p["id"] for p in body["items"]] == ids
    if "limit" in params or "offset" in params:
        assert body["total"] == 4


async def test_capabilities_from_samples(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        body = await get_json(client, CAPABILITIES)
        n1 = await get_json(client, CAPABILITIES, {"node_id": "n1"})
    assert "not from a vendor support matrix" in body["note"] and "not zero" in body["note"]
    cards = {(c["node_id"], c["gpu_index"]): c for c in body["items"]}
    assert list(cards) == [("n1", 0), ("n1", 1), ("n2", 0), ("n3", 0), ("n3", 1)]
    full, partial = cards["n1", 0], cards["n1", 1]
    assert full["metrics"] == dict.fromkeys(COUNTER_KEYS, "collectable")
    assert full["growth_prediction_possible"] and not full["collection_stalled"]
    assert full["sample_count"] == 576 and full["gpu_uuid"] == "GPU-n1-0"
    assert full["last_sample_at"] == "2026-01-10T12:00:00Z"
    assert full["first_sample_at"] == "2026-01-08T12:05:00Z"
    assert partial["metrics"] == {
        "ecc_uncorrected_total": "collectable", "ecc_corrected_total": "unknown",
        "retired_pages": "unknown", "remapped_rows_pending": "unknown",
        "remapped_rows_failure": "unknown",
    }
    assert partial["collection_stalled"] and not partial["growth_prediction_possible"]
    assert [c["xid_collectable"] for c in cards.values()] == [True, False, False, False, False]
    assert partial["gpu_uuid"] is None
    skewed = cards["n3", 1]  # its row dated after now does not count (and cannot hide a stall)
    assert skewed["sample_count"] == 1 and skewed["last_sample_at"] == "2026-01-10T11:00:00Z"
    assert [c["gpu_index"] for c in n1["items"]] == [0, 1]


async def test_capabilities_stall_threshold_is_configurable(db: Database) -> None:
    ctx = make_ctx(db, now=NOW + timedelta(minutes=61))
    async with serve(ctx) as client:
        body = await get_json(client, CAPABILITIES, {"node_id": "n1"})
    assert body["items"][0]["collection_stalled"] and body["stall_minutes"] == 60


async def test_samples_truncation_keeps_the_newest(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        cut = await get_json(client, SAMPLES, {"node_id": "n1", "gpu_index": "0", "limit": "10"})
        whole = await get_json(client, SAMPLES, {"node_id": "n1", "gpu_index": "0"})
        exact = await get_json(client, SAMPLES,
                               {"node_id": "n1", "gpu_index": "0", "limit": "576"})
    assert cut["truncated"] and cut["count"] == 10
    times = [s["sampled_at"] for s in cut["items"]]
    assert times == sorted(times) and times[-1] == "2026-01-10T12:00:00Z"
    assert times[0] == "2026-01-10T11:15:00Z"
    assert [s["ecc_corrected_total"] for s in cut["items"]] == list(range(991, 1001))
    assert not whole["truncated"] and whole["count"] == 576 and whole["limit"] == 5000
    assert whole["since"] == "2026-01-03T12:00:00Z" and whole["until"] == "2026-01-10T12:00:00Z"
    assert not exact["truncated"] and exact["count"] == 576


async def test_samples_unknown_is_null_and_sources_do_not_mix(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        real = await get_json(client, SAMPLES, {"node_id": "n1", "gpu_index": "1"})
        sim = await get_json(client, SAMPLES,
                             {"node_id": "n1", "gpu_index": "0", "source": "simulated"})
        none = await get_json(client, SAMPLES, {"node_id": "n1", "gpu_index": "7"})
    first = real["items"][0]
    assert first["ecc_uncorrected_total"] == 2 and first["ecc_corrected_total"] is None
    assert first["gpu_uuid"] is None and first["future"] is False
    assert [s["ecc_corrected_total"] for s in sim["items"]] == [99]
    assert none["items"] == [] and none["truncated"] is False


async def test_future_samples_only_when_until_reaches_them(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        default = await get_json(client, SAMPLES, {"node_id": "n3", "gpu_index": "1"})
        ahead = await get_json(client, SAMPLES, {"node_id": "n3", "gpu_index": "1",
                                                 "until": "2026-01-10T13:00:00Z"})
    assert [s["future"] for s in default["items"]] == [False]
    assert [(s["retired_pages"], s["future"]) for s in ahead["items"]] == [(-60, False),
                                                                           (10, True)]


@pytest.mark.parametrize(
    ("path", "params", "param"),
    [
        (SAMPLES, {"gpu_index": "0"}, "node_id"),
        (SAMPLES, {"node_id": "n1"}, "gpu_index"),
        (SAMPLES, {"node_id": "n1", "gpu_index": "0", "limit": "20001"}, "limit"),
        (SAMPLES, {"node_id": "n1", "gpu_index": "0", "limit": "0"}, "limit"),
        (SAMPLES, {"node_id": "n1", "gpu_index": "-1"}, "gpu_index"),
        (SAMPLES, {"node_id": "n1", "gpu_index": "0", "since": "2026-01-11T00:00:00Z"}, "since"),
        (PREDICTIONS, {"limit": "501"}, "limit"),
        (PREDICTIONS, {"limit": "1.0"}, "limit"),
        (PREDICTIONS, {"offset": "-1"}, "offset"),
        (PREDICTIONS, {"status": "open"}, "status"),
        (PREDICTIONS, {"source": "all"}, "source"),
        (PREDICTIONS, {"until": "2026-01-10"}, "until"),
        (PREDICTIONS, {"node": "n1"}, "node"),
        (CAPABILITIES, {"source": "all"}, "source"),
        (CAPABILITIES, {"gpu_index": "0"}, "gpu_index"),
    ],
)
async def test_bad_parameters_are_400_naming_them(
    db: Database, path: str, params: dict[str, str], param: str
) -> None:
    async with serve(make_ctx(db)) as client:
        body = await get_json(client, path, params, expect=400)
    assert body["param"] == param and param in body["error"]


async def test_unencoded_plus_in_offset_is_understood(db: Database) -> None:
    # Sent as typed in a shell: the '+' reaches the server as a space.
    url = PREDICTIONS + "?until=2026-01-02T20:00:00+08:00"
    async with serve(make_ctx(db)) as client, client.get(url) as r:
        body = await r.json()
    assert r.status == 200 and body["until"] == "2026-01-02T12:00:00Z"
    assert [p["id"] for p in body["items"]] == ["p-n2-miss", "p-n1-hit"]


async def test_router_misses_are_json(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        async with client.get("/api/v1/gpu-health/nope") as r:
            assert r.status == 404 and (await r.json())["param"] is None
        async with client.post(PREDICTIONS) as r:
            assert r.status == 405 and "Method Not Allowed" in (await r.json())["error"]


async def test_store_failure_is_a_generic_500_and_counted(tmp_path: Any) -> None:
    broken = DuckDBDatabase(tmp_path / "broken.duckdb")
    broken.execute("DROP TABLE gpu_health_predictions")
    registry = CollectorRegistry()
    async with serve(make_ctx(broken, registry=registry)) as client:
        async with client.get(PREDICTIONS) as r:
            body = await r.json()
        assert r.status == 500
        check_against_doc(PREDICTIONS, 500, body)
        assert body == {"error": "internal error; the evaluator log has the details",
                        "param": None}
        await get_json(client, CAPABILITIES)
        await get_json(client, PREDICTIONS, {"limit": "x"}, expect=400)
    broken.close()

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("gpu_health_evaluator_http_errors_total", reason="query") == 1
    assert value("gpu_health_evaluator_http_errors_total", reason="http_400") == 1
    assert value("gpu_health_evaluator_http_requests_total", endpoint=PREDICTIONS,
                 code="500") == 1
    assert value("gpu_health_evaluator_http_requests_total", endpoint=CAPABILITIES,
                 code="200") == 1


async def test_store_not_open_is_503_and_a_provider_is_followed(db: Database) -> None:
    current: list[Database | None] = [None]
    ctx = replace(make_ctx(db), db=lambda: current[0])
    async with serve(ctx) as client:
        for path in (PREDICTIONS, CAPABILITIES, "/api/v1/gpu-health/prediction-stats"):
            body = await get_json(client, path, expect=503)
            assert "not open" in body["error"]
        current[0] = db
        await get_json(client, PREDICTIONS)
