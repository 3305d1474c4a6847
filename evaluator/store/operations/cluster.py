"""Several evaluators on one PostgreSQL store: the leader lease and the member heartbeats.

Why a lease row with a TTL and not an advisory lock: an advisory lock lives as long as its
session, and a paused (SIGSTOP) or partitioned leader keeps its session open (the kernel still
acknowledges its TCP packets), so the lock would never pass on. A lease row expires by the
database's own clock (``now()``: the evaluators' clocks may disagree), whatever its holder's
state. Every takeover increments ``token``, the fencing token: the leader's write transactions
begin with :func:`check_fence`, which locks the lease row ``FOR SHARE``, so a takeover (an
UPDATE of that row) waits until such a transaction ends, and a transaction started after the
takeover finds the token changed and writes nothing (docs/ha.md).

PostgreSQL SQL only: a DuckDB store has one process, which is always the leader.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from gpu_health.errors import StoreError
from gpu_health.evaluator.store.db import Database

LEASE: Final = "leader"
_US: Final = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class LeaseView:
    """The lease as the database saw it: who holds it, with which token, until when."""

    holder: str | None
    token: int | None
    expires_at: datetime | None
    mine: bool


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    address: str | None


@dataclass(frozen=True, slots=True)
class ClusterView:
    lease: LeaseView
    members: tuple[Member, ...]


_ACQUIRE: Final = """
INSERT INTO gpu_health_leases AS l (name, holder, token, acquired_at, renewed_at, expires_at)
VALUES ($name, $me, 1, now(), now(), now() + to_microseconds($ttl_us))
ON CONFLICT (name) DO UPDATE SET
    token = CASE WHEN l.holder = excluded.holder AND l.expires_at > now() THEN l.token
                 ELSE l.token + 1 END,
    acquired_at = CASE WHEN l.holder = excluded.holder AND l.expires_at > now()
                       THEN l.acquired_at ELSE now() END,
    holder = excluded.holder, renewed_at = now(), expires_at = excluded.expires_at
WHERE l.holder = excluded.holder OR l.expires_at <= now()
RETURNING holder, token, expires_at"""

# The incarnation (one random id per process) tells two processes with the same member id
# apart: a row whose heartbeat is live and whose incarnation is another's is not taken over.
_HEARTBEAT: Final = """
INSERT INTO gpu_health_members AS m (member_id, address, started_at, heartbeat_at, incarnation)
VALUES ($me, $address, now(), now(), $incarnation)
ON CONFLICT (member_id) DO UPDATE SET heartbeat_at = now(), address = excluded.address,
    incarnation = excluded.incarnation
WHERE m.incarnation IS NULL OR m.incarnation = excluded.incarnation
   OR m.heartbeat_at <= now() - to_microseconds($ttl_us)
RETURNING member_id, m.address"""


def sync(db: Database, me: str, address: str | None, ttl: timedelta,
         candidate: bool = True, incarnation: str = "") -> ClusterView:
    """One heartbeat: renew this member, take or renew the lease when free or already ours
    (``candidate``), and read the lease and the live members (heartbeat within ``ttl``).
    Raises ``duplicate_member`` when another live process heartbeats with this member id."""
    if db.fetchone(_HEARTBEAT, {"me": me, "address": address, "incarnation": incarnation,
                                "ttl_us": ttl // _US}) is None:
        other = db.fetchone("SELECT address, started_at FROM gpu_health_members "
                            "WHERE member_id = $me", {"me": me})
        where = f" at {other[0]}" if other and other[0] else ""
        raise StoreError(f"another evaluator{where} is running with ha.member_id {me!r} (its "
                         "heartbeat is live): give every evaluator its own member_id, or leave "
                         "it unset to derive one from host and port", reason="duplicate_member")
    row = None
    if candidate:
        row = db.fetchone(_ACQUIRE, {"name": LEASE, "me": me, "ttl_us": ttl // _US})
    if row is None:
        row = db.fetchone("SELECT holder, token, expires_at FROM gpu_health_leases "
                          "WHERE name = $name AND expires_at > now()", {"name": LEASE})
    members = db.fetchall(
        "SELECT member_id, address FROM gpu_health_members "
        "WHERE heartbeat_at > now() - to_microseconds($ttl_us) ORDER BY member_id",
        {"ttl_us": ttl // _US})
    lease = LeaseView(None, None, None, False) if row is None else LeaseView(
        str(row[0]), int(row[1]), row[2], str(row[0]) == me)
    return ClusterView(lease, tuple(Member(str(m), None if a is None else str(a))
                                    for m, a in members))


def check_fence(db: Database, me: str, token: int) -> None:
    """First statement of each leader write transaction: the lease is still ours with this
    token, and stays so until the transaction ends (``FOR SHARE``). Raises ``fenced``."""
    row = db.fetchone("SELECT 1 FROM gpu_health_leases WHERE name = $name AND holder = $me "
                      "AND token = $token AND expires_at > now() FOR SHARE",
                      {"name": LEASE, "me": me, "token": token})
    if row is None:
        raise StoreError(f"this evaluator lost the leader lease (fencing token {token}): "
                         "the write is refused", reason="fenced")


def release(db: Database, me: str, token: int) -> None:
    """Give the lease up now (a clean shutdown): the next candidate need not wait the TTL."""
    db.execute("UPDATE gpu_health_leases SET expires_at = now() WHERE name = $name "
               "AND holder = $me AND token = $token", {"name": LEASE, "me": me, "token": token})


def leave(db: Database, me: str) -> None:
    """Remove this member (a clean shutdown): its targets move at the others' next heartbeat."""
    db.execute("DELETE FROM gpu_health_members WHERE member_id = $me", {"me": me})
