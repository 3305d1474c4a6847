"""This evaluator's place among the others on one PostgreSQL store: a heartbeat every third of
the lease TTL renews its membership and takes or renews the leader lease; the leader's loops run
under :meth:`Cluster.leading`, which sets the fencing check every store transaction of theirs
begins with (:data:`gpu_health.evaluator.store.engines.postgres.FENCE`).

Leadership is given up locally as soon as the lease may have expired: when no heartbeat has
succeeded for a TTL (the database unreachable, this process paused), ``is_leader`` turns false
before any other member can take over, and the fence refuses what was already under way.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

from gpu_health.errors import StoreError
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.engines.postgres import FENCE
from gpu_health.evaluator.store.operations import cluster as store

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    member_id: str
    address: str | None
    ttl: timedelta


class ClusterMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.leader = Gauge("gpu_health_evaluator_leader",
                            "1 while this evaluator holds the leader lease (runs the worker, "
                            "retention and the alert loop), else 0.", registry=registry)
        self.members = Gauge("gpu_health_evaluator_cluster_members",
                             "Evaluators whose heartbeat is younger than the lease TTL.",
                             registry=registry)
        self.changes = Counter("gpu_health_evaluator_leader_changes",
                               "Times this evaluator became or stopped being the leader.",
                               ["to"], registry=registry)
        self.heartbeat_errors = Counter("gpu_health_evaluator_heartbeat_errors",
                                        "Heartbeats (membership and lease) that failed.",
                                        registry=registry)


# What a failed heartbeat's StoreError reason means, for /readyz.
_FAILED: Final = {
    "unavailable": "cannot reach the store",
    "open": "cannot reach the store",
    "timeout": "the store did not answer in time",
    "permission": "the store refused access (permission denied: a grant was revoked?)",
    "resources": "the store is out of resources (disk full, memory or connections)",
    "conflict": "a write conflict (retried at the next heartbeat)",
    "duplicate_member": "another evaluator runs with this ha.member_id",
}


class Cluster:
    """Membership, the lease, and the fence of one evaluator (``tick`` is its loop)."""

    def __init__(self, db: Database, config: ClusterConfig, registry: CollectorRegistry,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.db = db
        self.config = config
        self.metrics = ClusterMetrics(registry)
        self._monotonic = monotonic
        self.view: store.ClusterView | None = None
        self._renewed: float | None = None  # monotonic time the last heartbeat was sent
        self._failed: str | None = None  # why the last heartbeat failed (None: it did not)
        self._held_token: int | None = None  # the token of this member's own lease, for logs
        self._leading = False
        self.incarnation = secrets.token_hex(8)  # this process, whatever its member id
        # Read at scrape time: a leader whose heartbeat hangs (a frozen database) must not
        # report 1 for longer than its lease could still be valid.
        self.metrics.leader.set_function(lambda: 1.0 if self.is_leader else 0.0)

    @property
    def me(self) -> str:
        return self.config.member_id

    @property
    def interval(self) -> float:
        return self.config.ttl.total_seconds() / 3

    @property
    def is_leader(self) -> bool:
        """Holds the lease by the last heartbeat, and that heartbeat was sent less than a TTL
        ago (so the lease it renewed has not yet expired by any clock)."""
        fresh = self._renewed is not None and \
            self._monotonic() - self._renewed < self.config.ttl.total_seconds()
        return self._leading and fresh

    @property
    def token(self) -> int | None:
        return self.view.lease.token if self.view is not None and self.is_leader else None

    def members(self) -> tuple[str, ...]:
        return tuple(m.member_id for m in self.view.members) if self.view is not None else ()

    async def tick(self) -> None:
        """Heartbeat: renew membership, take or renew the lease, read who is live."""
        sent = self._monotonic()
        try:
            view = await self.db.run(store.sync, self.db, self.me, self.config.address,
                                     self.config.ttl, True, self.incarnation)
        except BaseException as exc:
            self.metrics.heartbeat_errors.inc()
            self._failed = str(getattr(exc, "reason", "internal"))
            self._set_leading(self.is_leader)  # steps down once a TTL has passed
            raise
        self._failed = None
        self.view = view
        self._renewed = sent
        self._set_leading(view.lease.mine)
        if self._leading:
            self._held_token = view.lease.token  # a re-acquired lease has a new token
        self.metrics.members.set(len(view.members))

    async def claim(self) -> None:
        """Start-up: the first heartbeat. Another live evaluator with this member id stops the
        start (exit 1, said plainly); any other failure is left to the loop's ticks."""
        try:
            await self.tick()
        except StoreError as exc:
            if exc.reason == "duplicate_member":
                raise
            log.warning("first heartbeat failed (%s): retried by the cluster loop", exc.reason)

    def _set_leading(self, leading: bool) -> None:
        if leading != self._leading:
            token = self.view.lease.token if self.view is not None else None
            if leading:
                log.warning("now the leader (member %s, fencing token %s)", self.me, token)
            else:  # the lease may be another's by now: name the token this member held
                log.warning("no longer the leader (member %s, held fencing token %s)", self.me,
                            self._held_token)
            self.metrics.changes.labels("leader" if leading else "follower").inc()
            self._held_token = token if leading else None
        self._leading = leading

    async def leading(self, fn: Callable[[], Awaitable[T]]) -> T | None:
        """Run a leader-only tick: nothing on a follower; on the leader, every store
        transaction the tick opens first checks this lease's fencing token."""
        token = self.token
        if token is None:
            return None
        me, db = self.me, self.db

        def fence(_: Database) -> None:
            store.check_fence(db, me, token)

        reset = FENCE.set(fence)
        try:
            return await fn()
        finally:
            FENCE.reset(reset)

    def leader_text(self) -> str:
        """Who leads, for /readyz and logs."""
        lease = self.view.lease if self.view is not None else None
        if lease is None or lease.holder is None:
            return "no leader"
        address = next((m.address for m in (self.view.members if self.view else ())
                        if m.member_id == lease.holder), None)
        who = lease.holder + (f" ({address})" if address else "")
        if lease.mine and not self.is_leader:  # the same freshness as the leader gauge
            return (f"leader {who}, token {lease.token} by the last heartbeat, not confirmed "
                    "since: this evaluator does not act as leader")
        return f"leader {who}, token {lease.token}" + (" (this evaluator)" if lease.mine else "")

    def not_ready(self) -> str | None:
        """/readyz: not ready while the store cannot be reached for a heartbeat."""
        if self._failed is not None:
            return f"the last heartbeat failed: {_FAILED.get(self._failed, self._failed)}"
        if self._renewed is None:
            return "no heartbeat written to the store yet"
        age = self._monotonic() - self._renewed
        if age >= self.config.ttl.total_seconds():
            return f"no heartbeat for {age:.0f}s: cannot reach the store"
        return None

    async def close(self) -> None:
        """Clean shutdown: give the lease up and leave, so the others take over at once."""
        token = self.token
        try:
            if token is not None:
                await self.db.run(store.release, self.db, self.me, token)
            await self.db.run(store.leave, self.db, self.me)
        except Exception as exc:  # the store may be gone: the lease then simply expires
            log.warning("could not release the lease on shutdown: %s", type(exc).__name__)
        self._set_leading(False)

