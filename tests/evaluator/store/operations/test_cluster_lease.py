"""The leader lease and fencing on a real PostgreSQL: takeover only after expiry, a
new token per holder, a deposed leader's write refused in its own transaction, a takeover
waiting for the leader's running transaction instead of racing it."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from gpu_health.errors import StoreError
from gpu_health.evaluator.store.engines.postgres import FENCE, PostgresDatabase
from gpu_health.evaluator.store.operations.cluster import check_fence, release, sync
from tests.postgres import PostgresServer

TTL = timedelta(seconds=3)


@pytest.fixture
def pg(postgres: PostgresServer) -> Iterator[tuple[PostgresDatabase, PostgresDatabase]]:
    url = postgres.url(postgres.new_database())
    a, b = PostgresDatabase(url), PostgresDatabase(url)  # two evaluators
    yield a, b
    a.close()
    b.close()


def test_one_holder_renewals_keep_the_token_and_others_see_it(
        pg: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    a, b = pg
    first = sync(a, "a", "http://a:10347", TTL)
    assert first.lease.mine and first.lease.token == 1
    seen = sync(b, "b", "http://b:10347", TTL)
    assert not seen.lease.mine and seen.lease.holder == "a"
    assert [m.member_id for m in seen.members] == ["a", "b"]
    again = sync(a, "a", "http://a:10347", TTL)
    assert again.lease.mine and again.lease.token == 1


def test_takeover_only_after_expiry_with_a_new_token(
        pg: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    a, b = pg
    sync(a, "a", None, TTL)
    a.execute("UPDATE gpu_health_leases SET expires_at = now() - INTERVAL '1 second'")
    view = sync(b, "b", None, TTL)
    assert view.lease.mine and view.lease.token == 2
    with pytest.raises(StoreError) as refused:
        check_fence(a, "a", 1)
    assert refused.value.reason == "fenced"
    # the old holder coming back does not get it back while b renews
    assert not sync(a, "a", None, TTL).lease.mine


def test_release_hands_over_at_once(pg: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    a, b = pg
    token = sync(a, "a", None, TTL).lease.token
    assert token is not None
    release(a, "a", token)
    assert sync(b, "b", None, TTL).lease.token == token + 1


def test_a_fenced_transaction_of_a_deposed_leader_writes_nothing(
        pg: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    a, b = pg
    sync(a, "a", None, TTL)
    a.execute("UPDATE gpu_health_leases SET expires_at = now() - INTERVAL '1 second'")
    sync(b, "b", None, TTL)
    reset = FENCE.set(lambda db: check_fence(db, "a", 1))
    try:
        with pytest.raises(StoreError) as refused:  # a lone statement gets its own transaction
            a.execute("INSERT INTO gpu_health_nodes (node_id, last_seen) VALUES ('n', now())")
        assert refused.value.reason == "fenced"
    finally:
        FENCE.reset(reset)
    assert b.fetchone("SELECT count(*) FROM gpu_health_nodes")[0] == 0


def test_a_takeover_waits_for_the_leaders_running_transaction(
        pg: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    a, b = pg
    sync(a, "a", None, TTL)
    took: list[int | None] = []
    reset = FENCE.set(lambda db: check_fence(db, "a", 1))
    try:
        with a.transaction():  # the fence check holds the lease row FOR SHARE
            # the lease runs out while the transaction is open (made so here, not waited for)
            a.execute("UPDATE gpu_health_leases SET expires_at = now() - INTERVAL '1 second'")
            thread = threading.Thread(target=lambda: took.append(
                sync(b, "b", None, TTL).lease.token))
            thread.start()
            contextvars.Context().run(_wait_for_a_lock_wait, b)  # unfenced: an observer
            assert took == []  # the candidate waits behind this transaction
            a.execute("INSERT INTO gpu_health_nodes (node_id, last_seen) VALUES ('n', now())")
    finally:
        FENCE.reset(reset)
    thread.join(10)
    assert took == [2]  # after the commit, with a new token
    assert b.fetchone("SELECT count(*) FROM gpu_health_nodes")[0] == 1


def _wait_for_a_lock_wait(db: PostgresDatabase) -> None:
    """Until a backend of this database waits for a lock (bounded polling, no clock)."""
    for _ in range(2000):
        row = db.fetchone("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                          "current_database() AND wait_event_type = 'Lock'")
        if row[0]:
            return
    raise AssertionError("the candidate never waited for the lease row")


def test_a_refused_fence_returns_its_connection(
        pg: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    a, _ = pg
    reset = FENCE.set(lambda db: check_fence(db, "nobody", 1))
    try:
        for _ in range(20):  # more than the pool holds: a leaked connection would time out
            with pytest.raises(StoreError):
                a.execute("SELECT 1")
    finally:
        FENCE.reset(reset)
    assert a.fetchone("SELECT 1")[0] == 1
