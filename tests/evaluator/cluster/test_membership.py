"""One evaluator's membership loop on a real PostgreSQL: the first heartbeat leads,
the second member follows, leader-only ticks run only on the leader and under its fence, a
member whose heartbeats fail for a TTL steps down on its own, and a clean close hands over."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from gpu_health.errors import StoreError
from gpu_health.evaluator.cluster.membership import Cluster, ClusterConfig
from gpu_health.evaluator.store.engines.postgres import PostgresDatabase
from tests.postgres import PostgresServer

TTL = timedelta(seconds=6)


class Monotonic:
    """An injected monotonic clock: tests move it, nothing sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def dbs(postgres: PostgresServer) -> Iterator[tuple[PostgresDatabase, PostgresDatabase]]:
    url = postgres.url(postgres.new_database())
    a, b = PostgresDatabase(url), PostgresDatabase(url)
    yield a, b
    a.close()
    b.close()


def member(db: PostgresDatabase, name: str, clock: Monotonic) -> tuple[Cluster,
                                                                       CollectorRegistry]:
    registry = CollectorRegistry()
    return Cluster(db, ClusterConfig(name, f"http://{name}:10347", TTL), registry,
                   monotonic=clock), registry


async def test_first_leads_second_follows_and_readyz_names_the_leader(
        dbs: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    clock = Monotonic()
    (a, reg_a), (b, reg_b) = member(dbs[0], "a", clock), member(dbs[1], "b", clock)
    assert a.not_ready() == "no heartbeat written to the store yet"
    await a.tick()
    await b.tick()
    assert a.is_leader and not b.is_leader and a.not_ready() is None
    assert reg_a.get_sample_value("gpu_health_evaluator_leader") == 1
    assert reg_b.get_sample_value("gpu_health_evaluator_leader") == 0
    assert b.members() == ("a", "b")
    assert b.leader_text() == "leader a (http://a:10347), token 1"
    assert a.leader_text().endswith("(this evaluator)")


async def test_leader_only_ticks_run_on_the_leader_under_its_fence(
        dbs: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    clock = Monotonic()
    (a, _), (b, _) = member(dbs[0], "a", clock), member(dbs[1], "b", clock)
    await a.tick()
    await b.tick()
    ran: list[str] = []

    async def write(db: PostgresDatabase, name: str) -> str:
        await db.run(db.execute,
                     "INSERT INTO gpu_health_nodes (node_id, last_seen) VALUES ($name, now())",
                     {"name": name})
        ran.append(name)
        return name

    assert await a.leading(lambda: write(dbs[0], "by-a")) == "by-a"
    assert await b.leading(lambda: write(dbs[1], "by-b")) is None  # a follower runs nothing
    # the lease passes to b behind a's back (a paused past its TTL, say)
    dbs[1].execute("UPDATE gpu_health_leases SET expires_at = now() - INTERVAL '1 second'")
    await b.tick()
    assert b.is_leader
    with pytest.raises(StoreError) as fenced:  # a still believes it leads: the fence says no
        await a.leading(lambda: write(dbs[0], "late-by-a"))
    assert fenced.value.reason == "fenced"
    assert ran == ["by-a"]
    assert [r[0] for r in dbs[1].fetchall("SELECT node_id FROM gpu_health_nodes")] == ["by-a"]


async def test_a_member_that_cannot_heartbeat_steps_down_after_a_ttl(
        dbs: tuple[PostgresDatabase, PostgresDatabase], postgres: PostgresServer) -> None:
    clock = Monotonic()
    cluster, registry = member(dbs[0], "a", clock)
    await cluster.tick()
    assert cluster.is_leader
    dbs[0].close()  # the store is gone for this member
    clock.now += TTL.total_seconds() / 2
    with pytest.raises(Exception):  # noqa: B017 - whichever error the closed pool raises
        await cluster.tick()
    assert cluster.is_leader  # its lease is still valid: no other member can hold it yet
    clock.now += TTL.total_seconds() / 2
    assert not cluster.is_leader and cluster.not_ready() is not None
    with pytest.raises(Exception):  # noqa: B017
        await cluster.tick()
    assert registry.get_sample_value("gpu_health_evaluator_leader") == 0
    assert registry.get_sample_value("gpu_health_evaluator_heartbeat_errors_total") == 2


async def test_a_clean_close_hands_the_lease_over_at_once(
        dbs: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    clock = Monotonic()
    (a, _), (b, _) = member(dbs[0], "a", clock), member(dbs[1], "b", clock)
    await a.tick()
    await a.close()
    await b.tick()
    assert b.is_leader and b.members() == ("b",)


async def test_a_second_process_with_the_same_member_id_is_refused_until_the_first_is_gone(
        dbs: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    """Before: both led with the same fencing token and both ran the worker."""
    clock = Monotonic()
    (first, _), (twin, _) = member(dbs[0], "e1", clock), member(dbs[1], "e1", clock)
    await first.claim()
    with pytest.raises(StoreError) as refused:
        await twin.claim()
    assert refused.value.reason == "duplicate_member"
    assert "another evaluator at http://e1:10347 is running with ha.member_id 'e1'" \
        in str(refused.value)
    assert first.is_leader and not twin.is_leader
    with pytest.raises(StoreError):  # later heartbeats of the twin fail the same way
        await twin.tick()
    assert twin.not_ready() == ("the last heartbeat failed: another evaluator runs with this "
                                "ha.member_id")
    # the first one stopped without leaving (killed): once its heartbeat is a TTL old, the id
    # is free again
    dbs[0].execute("UPDATE gpu_health_members SET heartbeat_at = now() - INTERVAL '1 minute'")
    await twin.claim()
    assert twin.not_ready() is None


async def test_the_leader_gauge_and_readyz_drop_when_the_lease_is_not_confirmed(
        dbs: tuple[PostgresDatabase, PostgresDatabase]) -> None:
    """Before: a heartbeat hanging on a frozen database kept the gauge at 1 for 56 s and
    /readyz said "(this evaluator)"; both follow the lease's freshness now, without a tick."""
    clock = Monotonic()
    cluster, registry = member(dbs[0], "a", clock)
    await cluster.tick()
    assert registry.get_sample_value("gpu_health_evaluator_leader") == 1
    clock.now += TTL.total_seconds()  # no heartbeat finished since: the tick hangs
    assert registry.get_sample_value("gpu_health_evaluator_leader") == 0
    assert cluster.leader_text() == ("leader a (http://a:10347), token 1 by the last heartbeat, "
                                     "not confirmed since: this evaluator does not act as leader")


def test_store_errors_say_what_they_are() -> None:
    import psycopg

    from gpu_health.evaluator.store.engines.postgres import _store_error

    cases = {psycopg.errors.InsufficientPrivilege("permission denied for table x"): "permission",
             psycopg.errors.DiskFull("could not extend file"): "resources",
             psycopg.errors.SerializationFailure("could not serialize"): "conflict",
             psycopg.OperationalError("connection refused"): "unavailable"}
    for exc, reason in cases.items():
        assert _store_error(exc, "db:5432/x").reason == reason
