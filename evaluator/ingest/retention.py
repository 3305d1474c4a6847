"""Retention cleanup, triggered by real writes and kept off the scrape path.

Reference: cleanup runs once per 5000 real writes (rows), in its own task with its own timeout,
never inside a scrape cycle, and never in a deployment that writes nothing (most of them). A
run deletes samples (and XID samples, keeping each XID series' newest row) older than
``retention_days`` (GPU_HEALTH_RETENTION_DAYS, validated in
settings: a typo falls back to 180, it never turns into "delete everything").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Final

from gpu_health.clock import Clock
from gpu_health.evaluator.selfmetrics import SelfMetrics
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.maintenance import Deleted, delete_samples_before_async

log = logging.getLogger(__name__)

CLEANUP_EVERY_ROWS: Final = 5000
CLEANUP_TIMEOUT_S: Final = 300.0


async def _directly(fn: Callable[[], Awaitable[Any]]) -> Any:
    return await fn()


class Retention:
    """Counts real rows written; every ``every_rows`` it starts one cleanup task."""

    def __init__(self, db: Database, *, days: int, clock: Clock,
                 metrics: SelfMetrics | None = None, every_rows: int = CLEANUP_EVERY_ROWS,
                 timeout: float = CLEANUP_TIMEOUT_S,
                 leading: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]] | None = None
                 ) -> None:
        if days <= 0:
            raise ValueError("retention days must be positive")  # settings guarantees this
        self.db = db
        self.days = days
        self.clock = clock
        self.metrics = metrics
        self.every_rows = every_rows
        self.timeout = timeout
        # Several evaluators on one store: only the leader cleans up, under its fence
        # (gpu_health.evaluator.cluster.membership.Cluster.leading: None on a follower). Alone:
        # directly.
        self.leading = leading or _directly
        self.pending_rows = 0
        self.runs = 0
        self._task: asyncio.Task[None] | None = None

    def note_written(self, rows: int) -> None:
        """Called after each committed batch of real rows (never from a failed one)."""
        if rows <= 0:
            return
        self.pending_rows += rows
        if self.pending_rows < self.every_rows:
            return
        if self._task is not None and not self._task.done():
            return  # one cleanup at a time; the count keeps growing and triggers next time
        self.pending_rows = 0
        self._task = asyncio.get_running_loop().create_task(self.run_once(), name="retention")

    async def run_once(self) -> None:
        """One cleanup with its own timeout and its own catch-all (it runs as a lone task)."""
        cutoff = self.clock() - timedelta(days=self.days)

        async def delete() -> Deleted:
            self.runs += 1
            return await delete_samples_before_async(self.db, cutoff, self.timeout)

        try:
            deleted: Deleted | None = await self.leading(delete)
        except TimeoutError:
            log.warning("retention cleanup interrupted after %.0fs (cutoff %s); will retry",
                        self.timeout, cutoff.isoformat())
            self._result("timeout")
            return
        except Exception as exc:  # the task's one catch-all: count, log, never propagate
            reason = getattr(exc, "reason", "internal")
            log.error("retention cleanup failed (%s): %s", reason, exc)
            self._result("error")
            if self.metrics is not None:
                self.metrics.loop_error("retention", str(reason))
            return
        if deleted is None:
            return  # a follower: the leader cleans up
        log.info("retention cleanup deleted %d sample rows, %d XID and %d SXid sample rows "
                 "older than %s", deleted.samples, deleted.xid_samples, deleted.sxid_samples,
                 cutoff.isoformat())
        self._result("ok")
        if self.metrics is not None and deleted.total:
            self.metrics.cleanup_deleted.inc(deleted.total)

    def _result(self, result: str) -> None:
        if self.metrics is not None:
            self.metrics.cleanup_runs.labels(result).inc()

    async def wait(self) -> None:
        """Wait for a running cleanup to finish (tests, shutdown)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
