"""The benchmark store's fleet (bench/rules.py) holds exactly the cards it claims: N distinct
(node, GPU) cards and N distinct first UUIDs, at every size the benchmarks use (the node name
once stopped at four digits, which folded 100,000 cards into 80,000)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb

from bench.rules import NODE_OF_C, generate
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase


def test_node_names_are_distinct_up_to_a_million_cards() -> None:
    con = duckdb.connect()
    counts = con.execute(
        f"SELECT count(DISTINCT ({NODE_OF_C}, c % 8)), count(DISTINCT {NODE_OF_C}), "
        f"max(length({NODE_OF_C})) FROM range(1000000) r(c)").fetchone()
    assert counts == (1_000_000, 125_000, len("node-124999"))
    assert con.execute(f"SELECT {NODE_OF_C} FROM (SELECT 99999 AS c)").fetchone() == (
        "node-12499",)
    assert con.execute(f"SELECT {NODE_OF_C} FROM (SELECT 9 AS c)").fetchone() == ("node-0001",)


def test_the_generated_fleet_has_n_distinct_cards_and_uuids(tmp_path: Path) -> None:
    db = DuckDBDatabase(tmp_path / "bench.duckdb")
    cards = 2_000
    generate(db, cards, 1, datetime(2026, 3, 1, tzinfo=UTC))
    got = db.fetchone(
        "SELECT count(DISTINCT (node_id, gpu_index)), count(DISTINCT gpu_uuid) "
        "FILTER (WHERE gpu_uuid NOT LIKE '%-b') FROM gpu_health_samples", {})
    assert tuple(got) == (cards, cards)
    db.close()
