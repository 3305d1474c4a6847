"""How the store assembles a statement (evaluator/store/sql.py): holes filled by fill_statement
only, ``$name`` values only (a list of values is refused on both engines), rows from list
parameters, and each engine's dialect giving every fragment the shared statements leave open."""

from __future__ import annotations

import pytest

from gpu_health.evaluator.store.engines.duckdb_dialect import DIALECT as DUCKDB
from gpu_health.evaluator.store.engines.postgres_dialect import DIALECT as POSTGRESQL
from gpu_health.evaluator.store.sql import fill_statement, unnest_rows
from tests.conftest import NewDb


def test_fill_statement_fills_holes_and_the_holes_of_its_parts() -> None:
    assert fill_statement("SELECT {cols} FROM t{where}", cols="a, b", where="") == \
        "SELECT a, b FROM t"
    assert fill_statement("{outer}", outer="x{inner}", inner="y") == "xy"
    # text that is not a hole stays: a struct literal, a placeholder
    assert fill_statement("SELECT {'a': 1}, $n, {n}", n=2) == "SELECT {'a': 1}, $n, 2"


def test_a_hole_without_a_part_is_an_error_not_an_empty_string() -> None:
    with pytest.raises(KeyError, match="'cards'"):
        fill_statement("SELECT 1{cards}")
    with pytest.raises(ValueError, match="nest"):
        fill_statement("{a}", a="{a}")


def test_unnest_rows_names_one_list_parameter_per_column() -> None:
    assert unnest_rows(("n", "i"), ("VARCHAR", "INTEGER")) == \
        "unnest($n::VARCHAR[]), unnest($i::INTEGER[])"
    assert unnest_rows(("n",), ("VARCHAR",), alias=True) == "unnest($n::VARCHAR[]) AS n"


def test_rows_from_list_parameters_and_named_values_on_both_engines(new_db: NewDb) -> None:
    db = new_db()
    select = unnest_rows(("n", "i"), ("VARCHAR", "INTEGER"), alias=True)
    rows = db.fetchall(f"SELECT * FROM (SELECT {select}) AS r WHERE i >= $least ORDER BY i",
                       {"n": ["a", "b", None], "i": [1, 2, 3], "least": 2})
    assert [tuple(r) for r in rows] == [("b", 2), (None, 3)]


def test_positional_values_are_refused_on_both_engines(new_db: NewDb) -> None:
    db = new_db()
    before = db.statements
    with pytest.raises(TypeError, match=r"\$name"):
        db.fetchone("SELECT 1 WHERE 1 = ?", [1])  # type: ignore[arg-type]
    assert db.statements == before  # refused before it ran


def test_each_engine_gives_every_fragment() -> None:
    for dialect in (DUCKDB, POSTGRESQL):
        assert "{values" in dialect.feature_boundaries and "{base_j}" in dialect.feature_boundaries
        assert " r" in dialect.feature_asof
        assert "{step_us}" in dialect.run_times
    assert DUCKDB.feature_shard is None  # DuckDB runs the features statement whole
    assert POSTGRESQL.feature_shard is not None and "$shard" in POSTGRESQL.feature_shard
