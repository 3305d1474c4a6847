"""``capabilities``' ``nodes``: listed cards per node beside the cards with samples, per source
and per tenant, unknown (null) where no scrape of the source listed the node."""

from __future__ import annotations

from pathlib import Path

from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.maintenance import (
    NodeRecord,
    purge_simulated,
    upsert_nodes,
)
from tests.evaluator.api_support import (
    NOW,
    add_samples,
    get_json,
    make_ctx,
    sample,
    serve,
    token_set,
)

PATH = "/api/v1/gpu-health/capabilities"


def _db(tmp_path: Path) -> Database:
    db = DuckDBDatabase(tmp_path / "cards.duckdb")
    upsert_nodes(db, [NodeRecord("n1", "a", "n1:10346", NOW, 8, "real"),
                      NodeRecord("n2", "b", "n2:10346", NOW, 2, "real"),
                      NodeRecord("demo", None, "demo:10346", NOW, 1, "simulated")])
    add_samples(db, [sample("n1", i, NOW, ecc_corrected_total=1) for i in range(6)]
                + [sample("n2", i, NOW, ecc_corrected_total=1) for i in range(3)]
                + [sample("demo", 0, NOW, source="simulated", ecc_corrected_total=1),
                   sample("sim", 0, NOW, source="simulated", ecc_corrected_total=1)])
    return db


async def test_unsampled_cards_are_counted_per_node_never_negative(tmp_path: Path) -> None:
    db = _db(tmp_path)
    async with serve(make_ctx(db)) as client:
        body = await get_json(client, PATH, token=None)
        assert body["nodes"] == [
            {"node_id": "n1", "cards_with_samples": 6, "listed_cards": 8, "unsampled_cards": 2,
             "listed_at": "2026-01-10T12:00:00Z"},
            {"node_id": "n2", "cards_with_samples": 3, "listed_cards": 2, "unsampled_cards": 0,
             "listed_at": "2026-01-10T12:00:00Z"},
        ]
        simulated = await get_json(client, PATH, {"source": "simulated"}, token=None)
        assert [(n["node_id"], n["listed_cards"], n["unsampled_cards"])
                for n in simulated["nodes"]] == [("demo", 1, 0), ("sim", None, None)]
        one = await get_json(client, PATH, {"node_id": "n2"}, token=None)
        assert [n["node_id"] for n in one["nodes"]] == ["n2"]
    purge_simulated(db)
    assert db.fetchone("SELECT listed_cards FROM gpu_health_nodes WHERE node_id = 'demo'")[0] \
        is None
    db.close()


async def test_a_tenant_sees_only_its_nodes_counts(tmp_path: Path) -> None:
    db = _db(tmp_path)
    async with serve(make_ctx(db, tokens=token_set(tmp_path))) as client:
        body = await get_json(client, PATH, token="team-a")
        assert [n["node_id"] for n in body["nodes"]] == ["n1"]
    db.close()
