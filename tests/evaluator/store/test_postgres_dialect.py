"""The statements written once answer the same on both engines where the dialects differ most
: DuckDB's arg_min/arg_max against PostgreSQL's rewrite of them, over random rows
with unknown values and a FILTER; integer division; the hour arithmetic of the features."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.engines.postgres import PostgresDatabase
from gpu_health.evaluator.store.engines.postgres_dialect import rewrite, to_pyformat
from tests.postgres import PostgresServer

BASE = datetime(2026, 1, 1)
QUERY = ("SELECT g, arg_min(v, k), arg_max(v, k), arg_min(v, k) FILTER (WHERE v > 5), "
         "arg_max_null(v, k), arg_min_null(v, k) FROM rows GROUP BY g ORDER BY g")


@pytest.fixture(scope="module")
def pg(postgres: PostgresServer) -> Iterator[PostgresDatabase]:
    db = PostgresDatabase(postgres.url(postgres.new_database()))
    yield db
    db.close()


rows_st = st.lists(
    st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(-10**12, 10**12))),
    min_size=1, max_size=40)


def _on_both(pg: PostgresDatabase, columns: str, data: list[tuple[Any, ...]],
             sql: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``sql`` over a table ``rows`` of ``data`` on DuckDB and on PostgreSQL: both answers."""
    marks = ", ".join("?" * len(data[0]))
    duck = duckdb.connect()
    duck.execute(f"CREATE TABLE rows ({columns})")
    duck.executemany(f"INSERT INTO rows VALUES ({marks})", data)
    expected = duck.execute(sql).fetchall()
    duck.close()
    with pg.transaction():
        pg.execute(f"CREATE TEMP TABLE rows ({columns}) ON COMMIT DROP")
        named = ", ".join(f"$c{i}" for i in range(len(data[0])))
        for row in data:
            pg.execute(f"INSERT INTO rows VALUES ({named})",
                       {f"c{i}": v for i, v in enumerate(row)})
        got = [tuple(r) for r in pg.fetchall(sql)]
    return expected, got


def _load(rows: list[tuple[int, int | None]]) -> list[tuple[int, int | None, datetime]]:
    # distinct keys per group: both engines then agree on which row is first and last
    return [(g, v, BASE + timedelta(minutes=i)) for i, (g, v) in enumerate(rows)]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows_st)
def test_arg_min_and_max_agree_across_engines(pg: PostgresDatabase,
                                              rows: list[tuple[int, int | None]]) -> None:
    expected, got = _on_both(pg, "g INTEGER, v BIGINT, k TIMESTAMP", _load(rows), QUERY)
    assert got == expected


@pytest.mark.parametrize(("sql", "params"), [
    ("SELECT (7::BIGINT // 2) - 1, (-7)::BIGINT // 2", None),
    ("SELECT datediff('hour', $a::TIMESTAMP, $b::TIMESTAMP), hour($b::TIMESTAMP)",
     {"a": datetime(2026, 1, 1, 0, 59), "b": datetime(2026, 1, 2, 3, 0)}),
    ("SELECT list_sum(list_slice(list_value(1::BIGINT, 2::BIGINT, 3::BIGINT), 2, 3)), "
     "list_contains(list_value('a'::VARCHAR, 'b'::VARCHAR), 'b'::VARCHAR)", None),
    ("SELECT epoch_us($t::TIMESTAMP), $t::TIMESTAMP + to_microseconds(1500000)",
     {"t": datetime(2026, 1, 1, 0, 0, 0, 250)}),
])
def test_shared_functions_answer_alike(pg: PostgresDatabase, sql: str,
                                       params: dict[str, Any] | None) -> None:
    duck = DuckDBDatabase(":memory:")  # both through the store's door (times come back aware)
    expected = duck.fetchone(sql, params)
    duck.close()
    assert tuple(pg.fetchone(sql, params)) == expected


@pytest.mark.parametrize(("sql", "expected"), [
    # a parenthesis in a string literal is not the FILTER's end (broken SQL)
    ("SELECT arg_min(v, k) FILTER (WHERE s <> ')') FROM t",
     "SELECT (min(ARRAY[gpu_health_order_us(k), v]) FILTER (WHERE (v) IS NOT NULL AND (k) IS "
     "NOT NULL AND (s <> ')')))[2] FROM t"),
    # a call in a comment or a literal is text, not a call (was a bare ValueError)
    ("SELECT 1 -- arg_max(\nFROM t", "SELECT 1 -- arg_max(\nFROM t"),
    ("SELECT 'arg_max(' /* arg_min(v, k) */ FROM t",
     "SELECT 'arg_max(' /* arg_min(v, k) */ FROM t"),
    # the _null aggregates and other names ending in arg_max are not rewritten
    ("SELECT arg_max_null(u, k), my_arg_max(v, k) FROM t",
     "SELECT arg_max_null(u, k), my_arg_max(v, k) FROM t"),
    # a call that never closes goes to PostgreSQL as written, which names the error
    ("SELECT arg_max(v, k FROM t", "SELECT arg_max(v, k FROM t"),
])
def test_the_rewrite_skips_literals_and_comments(sql: str, expected: str) -> None:
    assert rewrite(sql) == expected


def test_placeholders_in_block_comments_are_left_alone() -> None:
    assert to_pyformat("SELECT $y /* $y 5% */, '%' -- $x\n, $x") == (
        "SELECT %(y)s /* $y 5%% */, '%%' -- $x\n, %(x)s")


def test_a_literal_parenthesis_in_a_filter_answers_as_on_duckdb(pg: PostgresDatabase) -> None:
    sql = ("SELECT g, arg_min(v, k) FILTER (WHERE s <> ')') -- arg_max( in a comment\n"
           "FROM rows GROUP BY g ORDER BY g")
    data = [(0, 5, BASE, ")"), (0, 7, BASE + timedelta(minutes=1), "x"),
            (1, 9, BASE, ")")]
    expected, got = _on_both(pg, "g INTEGER, v BIGINT, k TIMESTAMP, s VARCHAR", data, sql)
    assert expected == [(0, 7), (1, None)]
    assert got == expected


def test_no_arg_min_or_max_aggregate_is_defined_any_more(pg: PostgresDatabase) -> None:
    """Every call is rewritten before PostgreSQL sees it: the old aggregates were dead and are
    dropped at start (the _null ones stay: they are called)."""
    names = {r[0] for r in pg.fetchall(
        "SELECT proname FROM pg_proc WHERE proname LIKE 'arg\\_m%' AND prokind = 'a'")}
    assert names == {"arg_min_null", "arg_max_null"}
