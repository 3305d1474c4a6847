"""prediction-stats through the real server: both windows, null ratios (never 0) while data is
insufficient, real numbers once it is, simulated predictions kept out of real statistics, and
tenant tokens counting only their own nodes. The statistics themselves are
gpu_health.evaluator.stats.prediction_stats (tested with the rules); this checks the API around
it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.conftest import STORE_ENGINES, open_store
from tests.evaluator.api_support import (
    NOW,
    add_node,
    add_prediction,
    add_samples,
    build_dataset,
    get_json,
    make_ctx,
    sample,
    serve,
    token_set,
)

STATS = "/api/v1/gpu-health/prediction-stats"


@pytest.fixture(scope="module", params=STORE_ENGINES)
def db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    database = open_store(request, request.param, tmp_path_factory.mktemp("stats"), "api")
    build_dataset(database)
    add_prediction(database, "p-sim-hit", "n1", 0, NOW - timedelta(days=10), source="simulated",
                   status="hit", resolved_at=NOW - timedelta(days=9))
    yield database
    database.close()


def _window(body: dict[str, Any], days: int) -> dict[str, Any]:
    (window,) = [w for w in body["windows"] if w["window_days"] == days]
    return window


async def test_insufficient_data_gives_null_ratios_and_a_note(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        body = await get_json(client, STATS)
    assert [w["window_days"] for w in body["windows"]] == [7, 30]
    assert body["disclaimer"] and body["source"] == "real"
    assert body["until"] == "2026-01-10T12:00:00Z"
    # the first midnight at or after now - 180 days of retention (whole sealed days)
    assert body["since"] == "2025-07-15T00:00:00Z"
    week = _window(body, 7)
    assert week["predictions"] == {"pending": 1, "hit": 1, "miss": 1, "voided": 1}
    assert week["matured"] == 2 and not week["sufficient"]
    assert week["precision"] is None and week["recall"] is None and week["f1"] is None
    assert "observed" in week["note"] and "(gate 20)" in week["note"]


async def test_thresholds_come_from_the_active_ruleset(db: Database) -> None:
    ruleset = load_ruleset(env={"GPU_HEALTH_RULE_STATS_MIN_MATURED": "2",
                                "GPU_HEALTH_RULE_STATS_MIN_OBSERVED_DAYS": "1"})
    async with serve(replace(make_ctx(db), ruleset=ruleset)) as client:
        body = await get_json(client, STATS)
    week = _window(body, 7)
    assert week["required_matured"] == 2 and week["required_days"] == 1
    assert week["sufficient"] and week["precision"] == pytest.approx(0.5)


async def test_fault_events_follow_the_active_ruleset(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        ecc_only = await get_json(client, STATS)
    async with serve(replace(make_ctx(db), ruleset=load_ruleset(env={}))) as client:
        v2 = await get_json(client, STATS)  # the default rule set, v2-ecc-xid
    assert _window(ecc_only, 7)["fault_events"] == ["ecc_uncorrected"]
    assert _window(v2, 30)["fault_events"] == ["ecc_uncorrected", "xid:48", "xid:63",
                                               "xid:64", "xid:94", "xid:95"]


async def test_simulated_never_enters_real_stats(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        real = await get_json(client, STATS)
        sim = await get_json(client, STATS, {"source": "simulated"})
    assert _window(real, 7)["predictions"]["hit"] == 1  # p-sim-hit not counted
    assert _window(sim, 7)["predictions"] == {"pending": 1, "hit": 1, "miss": 0, "voided": 0}
    assert sim["source"] == "simulated"


async def test_tenant_tokens_count_only_their_nodes(db: Database, tmp_path: Path) -> None:
    async with serve(make_ctx(db, tokens=token_set(tmp_path))) as client:
        team = await get_json(client, STATS, token="team-a")
        both = await get_json(client, STATS, token="team-ab")
        admin = await get_json(client, STATS, token="admin")
    assert _window(team, 7)["predictions"] == {"pending": 1, "hit": 1, "miss": 0, "voided": 0}
    assert _window(both, 7)["predictions"] == {"pending": 1, "hit": 1, "miss": 1, "voided": 0}
    assert _window(admin, 7)["predictions"]["voided"] == 1  # n3 has no tenant: admin only
    assert _window(team, 7)["monitorable_cards"] < _window(admin, 7)["monitorable_cards"]


async def test_since_parameter(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        recent = await get_json(client, STATS, {"since": "2026-01-08T00:00:00Z"})
        future = await get_json(client, STATS, {"since": "2026-01-11T00:00:00Z"}, expect=400)
        bad = await get_json(client, STATS, {"since": "last week"}, expect=400)
    assert recent["since"] == "2026-01-08T00:00:00Z"
    assert _window(recent, 7)["predictions"] == {"pending": 1, "hit": 0, "miss": 0, "voided": 0}
    assert future["param"] == bad["param"] == "since"


async def test_sufficient_data_gives_numbers_and_lists_missed_cards(tmp_path: Path) -> None:
    db = DuckDBDatabase(tmp_path / "enough.duckdb")
    add_node(db, "s1", "a")
    start = NOW - timedelta(days=10)
    fault_at = start + timedelta(days=5)
    add_samples(db, [
        sample("s1", gpu, start + timedelta(hours=h), uuid=f"GPU-s1-{gpu}",
               ecc_corrected_total=h, ecc_uncorrected_total=int(start + timedelta(hours=h)
                                                                >= fault_at))
        for gpu in (0, 1) for h in range(240)
    ])
    for i in range(25):  # 15 hits, 10 misses on card 0; the first hit's window holds the fault
        status = "hit" if i < 15 else "miss"
        add_prediction(db, f"p{i:02d}", "s1", 0, start + timedelta(days=3, minutes=i),
                       gpu_uuid="GPU-s1-0", status=status, resolved_at=NOW)
    async with serve(make_ctx(db)) as client:
        body = await get_json(client, STATS)
    db.close()
    week = _window(body, 7)
    assert week["sufficient"] and week["matured"] == 25
    assert week["precision"] == pytest.approx(0.6)
    assert week["faulty_cards"] == 2 and week["predicted_faulty_cards"] == 1
    assert week["recall"] == pytest.approx(0.5) and week["missed_cards"] == 1
    assert [(m["node_id"], m["gpu_index"]) for m in week["missed"]] == [("s1", 1)]
    month = _window(body, 30)  # no 30-day predictions: not enough matured, null not 0
    assert month["precision"] is None and month["matured"] == 0
