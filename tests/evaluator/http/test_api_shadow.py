"""A shadow version's predictions through the real server: out of the default statistics and
listing, there for ``?rule_version=`` (the dashboard's side-by-side view reads the same)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.conftest import STORE_ENGINES, open_store
from tests.evaluator.api_support import (
    NOW,
    RULE_VERSION,
    add_prediction,
    build_dataset,
    get_json,
    make_ctx,
    serve,
)

SHADOW = "v1-ecc-growth-cal-0a1b2c"


@pytest.fixture(scope="module", params=STORE_ENGINES)
def db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    database = open_store(request, request.param, tmp_path_factory.mktemp("shadow"), "api")
    build_dataset(database)
    for i, status in enumerate(("hit", "hit", "miss", "pending")):
        add_prediction(database, f"shadow-{i}", "n1", i % 2, NOW - timedelta(days=2 + i),
                       rule_version=SHADOW, shadow=True, status=status,
                       resolved_at=None if status == "pending" else NOW - timedelta(days=1))
    yield database
    database.close()


async def test_statistics_count_the_active_version_unless_asked(db: Any) -> None:
    async with serve(make_ctx(db)) as client:
        default = await get_json(client, "/api/v1/gpu-health/prediction-stats")
        own = await get_json(client, "/api/v1/gpu-health/prediction-stats",
                             params={"rule_version": SHADOW})
    week, shadow_week = default["windows"][0], own["windows"][0]
    assert SHADOW not in week["rule_versions"]
    assert shadow_week["rule_versions"] == [SHADOW]
    assert shadow_week["predictions"] == {"pending": 1, "hit": 2, "miss": 1, "voided": 0}
    # what build_dataset alone holds (test_api_stats.py): none of the shadow's four
    assert week["predictions"] == {"pending": 1, "hit": 1, "miss": 1, "voided": 1}


async def test_listing_leaves_shadow_predictions_out_unless_asked(db: Any) -> None:
    async with serve(make_ctx(db)) as client:
        default = await get_json(client, "/api/v1/gpu-health/predictions")
        own = await get_json(client, "/api/v1/gpu-health/predictions",
                             params={"rule_version": SHADOW})
    assert SHADOW not in {i["rule_version"] for i in default["items"]}
    assert RULE_VERSION in {i["rule_version"] for i in default["items"]}
    assert not any(i["shadow"] for i in default["items"])
    assert len(own["items"]) == own["total"] == 4
    assert all(i["shadow"] and i["rule_version"] == SHADOW for i in own["items"])
