"""A batch written as NumPy columns (DuckDB) holds exactly what the shared unnest statement
writes: NULL stays NULL, big counters stay exact, timestamps keep their microseconds; a wide
result read back as columns gives the rows and Python types ``fetchall`` gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_health.errors import StoreError
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase

CASTS = ("VARCHAR", "INTEGER", "BIGINT", "TIMESTAMP", "BOOLEAN", "DOUBLE")
NAMES = ("s", "i", "b", "t", "f", "d")
TABLE = ("CREATE TABLE {} (s VARCHAR, i INTEGER, b BIGINT, t TIMESTAMP, f BOOLEAN, "
         "d DOUBLE)")

_ROW = st.tuples(
    st.none() | st.text(max_size=12),
    st.none() | st.integers(-(2**31), 2**31 - 1),
    st.none() | st.integers(-(2**63) + 1, 2**63 - 1),
    st.none() | st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1),
                             timezones=st.just(UTC)),  # aware in, aware out: the store's door
    st.none() | st.booleans(),
    st.none() | st.floats(allow_nan=False, allow_infinity=False, width=64),
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> DuckDBDatabase:
    database = DuckDBDatabase(Path(tmp_path_factory.mktemp("columns")) / "c.duckdb")
    database.execute(TABLE.format("numpy_rows"))
    database.execute(TABLE.format("list_rows"))
    return database


def _columns(rows: list[tuple[object, ...]]) -> dict[str, list[object]]:
    return {name: [row[i] for row in rows] for i, name in enumerate(NAMES)}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_ROW, min_size=1, max_size=40))
def test_numpy_columns_write_what_the_unnest_statement_writes(
        db: DuckDBDatabase, rows: list[tuple[object, ...]]) -> None:
    db.execute("DELETE FROM numpy_rows")
    db.execute("DELETE FROM list_rows")
    db.insert_columns("numpy_rows", _columns(rows), CASTS)
    Database.insert_columns(db, "list_rows", _columns(rows), CASTS)  # the shared statement
    order = "ORDER BY ALL NULLS FIRST"
    written = db.fetchall(f"SELECT * FROM numpy_rows {order}")
    assert written == db.fetchall(f"SELECT * FROM list_rows {order}")
    assert sorted(written, key=repr) == sorted(rows, key=repr)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_ROW, max_size=40))
def test_a_wide_result_read_as_columns_is_what_fetchall_reads(
        db: DuckDBDatabase, rows: list[tuple[object, ...]]) -> None:
    db.execute("DELETE FROM list_rows")
    Database.insert_columns(db, "list_rows", _columns(rows), CASTS)
    select = "SELECT *, i IS NULL, count(*) OVER () FROM list_rows ORDER BY ALL NULLS FIRST"
    wide = db.fetchall_wide(select)
    assert wide == db.fetchall(select)
    assert [tuple(map(type, row)) for row in wide] == \
        [tuple(map(type, row)) for row in db.fetchall(select)]


def test_a_repeated_instant_and_its_neighbours_stay_apart(db: DuckDBDatabase) -> None:
    at = datetime(2026, 12, 1, 3, 4, 5, 123456, tzinfo=UTC)
    stamps = [at, None, at, at + timedelta(microseconds=1), at]
    db.execute("DELETE FROM numpy_rows")
    db.insert_columns("numpy_rows", {"t": stamps}, ("TIMESTAMP",))
    assert [r[0] for r in db.fetchall("SELECT t FROM numpy_rows")] == stamps


def test_a_value_its_column_cannot_hold_is_a_store_error(db: DuckDBDatabase) -> None:
    with pytest.raises(StoreError, match="does not fit"):
        db.insert_columns("numpy_rows", {"b": [2**64]}, ("BIGINT",))
    with pytest.raises(StoreError, match="naive-UTC"):
        db.insert_columns("numpy_rows", {"t": ["yesterday"]}, ("TIMESTAMP",))


def test_a_refused_batch_inside_a_transaction_leaves_nothing(db: DuckDBDatabase) -> None:
    db.execute("DELETE FROM numpy_rows")
    with pytest.raises(StoreError), db.transaction():
        db.insert_columns("numpy_rows", {"i": [1]}, ("INTEGER",))
        db.insert_columns("numpy_rows", {"i": [2**40]}, ("INTEGER",))  # out of range
    db.insert_columns("numpy_rows", {"i": [3]}, ("INTEGER",))  # the cursor still works
    assert db.fetchall("SELECT i FROM numpy_rows") == [(3,)]
