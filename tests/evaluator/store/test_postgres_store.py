"""What is PostgreSQL's own in the store: connecting (a clear error naming the host,
never the password), migrations run once by evaluators starting together, a schema newer than
the code refused, the indexes PostgreSQL reads by, DuckDB's placeholders rewritten, and a
database lost and back at runtime (statements fail with a reason, then work again)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import psycopg
import pytest

from gpu_health.errors import StoreError
from gpu_health.evaluator.store.engines.postgres import PostgresDatabase
from gpu_health.evaluator.store.engines.postgres_dialect import to_pyformat
from gpu_health.evaluator.store.migrations import MIGRATIONS
from tests.postgres import PASSWORD, PostgresServer, postgres_server


@pytest.fixture
def url(postgres: PostgresServer) -> str:
    return postgres.url(postgres.new_database())


def test_unreachable_server_is_one_clear_error_naming_the_host() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    with pytest.raises(StoreError) as err:
        PostgresDatabase(f"postgresql://u:{PASSWORD}@127.0.0.1:{port}/db", connect_timeout=1)
    assert err.value.reason == "open"
    assert f"127.0.0.1:{port}/db" in str(err.value) and PASSWORD not in str(err.value)


def test_wrong_password_is_refused_without_echoing_it(postgres: PostgresServer) -> None:
    url = postgres.url(postgres.new_database(), password=False)
    with pytest.raises(StoreError) as err:
        PostgresDatabase(url, password="not-the-password", connect_timeout=2)
    assert "not-the-password" not in str(err.value) and err.value.reason == "open"
    PostgresDatabase(url, password=PASSWORD).close()  # the password given apart works


def test_evaluators_starting_together_migrate_once(url: str) -> None:
    opened: list[PostgresDatabase] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(PostgresDatabase(url))
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and len(opened) == 3
    versions = opened[0].fetchall("SELECT version FROM schema_migrations ORDER BY 1")
    assert [v[0] for v in versions] == [m[0] for m in MIGRATIONS]
    for db in opened:
        db.close()


def test_a_schema_newer_than_the_code_is_refused_before_anything_is_written(url: str) -> None:
    """A rolling upgrade: the newer release migrated and redefined a shared SQL function; the
    old evaluator that starts next must give up without redefining it."""
    db = PostgresDatabase(url)
    db.execute("INSERT INTO schema_migrations VALUES (999, 'from the future', now())")
    db.execute("CREATE OR REPLACE FUNCTION epoch_us(t timestamp) RETURNS bigint "
               "LANGUAGE sql IMMUTABLE AS $$ SELECT 42::bigint $$")
    db.close()
    with pytest.raises(StoreError) as err:
        PostgresDatabase(url)
    assert err.value.reason == "schema" and "999" in str(err.value)
    with psycopg.connect(url) as con:
        body = con.execute("SELECT prosrc FROM pg_proc WHERE proname = 'epoch_us'").fetchone()
    assert body is not None and "42" in body[0]  # the newer release's definition stands


def test_an_older_evaluator_recreates_nothing_a_newer_release_dropped(url: str) -> None:
    """An older evaluator pointed at an upgraded PostgreSQL re-created 12 aggregate objects the
    newer release had dropped, then refused. The schema check now comes first."""
    db = PostgresDatabase(url)
    db.execute("INSERT INTO schema_migrations VALUES (998, 'from the future', now())")
    db.execute("DROP AGGREGATE IF EXISTS any_value(anyelement)")
    db.close()
    with pytest.raises(StoreError) as err:
        PostgresDatabase(url)
    assert err.value.reason == "schema"
    with psycopg.connect(url) as con:
        found = con.execute("SELECT count(*) FROM pg_proc p JOIN pg_namespace n "
                            "ON n.oid = p.pronamespace WHERE proname = 'any_value' "
                            "AND nspname NOT IN ('pg_catalog', 'information_schema')"
                            ).fetchone()
    assert found == (0,)  # still dropped


def test_reads_go_through_indexes_identifiers_sort_as_bytes_no_counter_default(url: str) -> None:
    db = PostgresDatabase(url)
    indexes = {r[0] for r in db.fetchall("SELECT indexname FROM pg_indexes "
                                         "WHERE tablename LIKE 'gpu_health_%'")}
    assert {"idx_samples_card_time", "idx_samples_time", "idx_xid_samples_series",
            "idx_sxid_samples_series"} <= indexes
    defaults = db.fetchall("SELECT column_name FROM information_schema.columns WHERE "
                           "table_name = 'gpu_health_samples' AND column_default IS NOT NULL")
    assert defaults == []
    collations = {r[0] for r in db.fetchall(
        "SELECT collation_name FROM information_schema.columns WHERE table_name LIKE "
        "'gpu_health%' AND data_type = 'character varying'")}
    assert collations == {"C"}  # byte order, as DuckDB sorts
    db.close()


@pytest.mark.parametrize(("duck", "psycopg"), [
    ("WHERE a = $name AND b = $name", "WHERE a = %(name)s AND b = %(name)s"),
    ("unnest($node_id::INT[]), $_x1", "unnest(%(node_id)s::INT[]), %(_x1)s"),
    ("SELECT '$x', 5 % 2 -- $y", "SELECT '$x', 5 %% 2 -- $y"),
    ("DO $$ SELECT 1 % 2 $$", "DO $$ SELECT 1 %% 2 $$"),
])
def test_placeholders_are_rewritten_outside_literals(duck: str, psycopg: str) -> None:
    assert to_pyformat(duck) == psycopg


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    with postgres_server() as server:  # its own cluster: this test stops it
        yield server


def test_a_database_lost_at_runtime_fails_statements_then_works_again(
        own_server: PostgresServer) -> None:
    db = PostgresDatabase(own_server.url(own_server.new_database()), connect_timeout=2)
    db.execute("INSERT INTO gpu_health_nodes (node_id, last_seen) VALUES ('n1', now())")
    own_server.stop("fast")  # the test cluster runs without fsync: a clean stop keeps rows
    with pytest.raises(StoreError) as err:
        db.fetchone("SELECT count(*) FROM gpu_health_nodes")
    assert err.value.reason in ("unavailable", "query")
    own_server.start()
    for _ in range(3):  # the pool replaces the broken connections
        try:
            assert db.fetchone("SELECT count(*) FROM gpu_health_nodes")[0] == 1
            break
        except StoreError:
            continue
    else:
        raise AssertionError("the store did not come back")
    db.close()
