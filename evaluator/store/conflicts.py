"""Re-running a store transaction that lost a write-write race: DuckDB's optimistic concurrency
fails the second writer of a row instead of waiting (PostgreSQL's serialization failures and
deadlocks read the same, ``StoreError.reason == "conflict"``). The one retry loop of the store;
a statement it re-runs must be idempotent (an upsert, a compare-and-set)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, TypeVar

from gpu_health.errors import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")
ATTEMPTS: Final = 5


def retry_conflicts(fn: Callable[[], T]) -> T:
    """``fn()``, re-run up to ATTEMPTS times in all while it fails with a write conflict."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return fn()
        except StoreError as exc:
            if exc.reason != "conflict" or attempt == ATTEMPTS:
                raise
            log.info("write conflict with a concurrent writer (attempt %d), re-running: %s",
                     attempt, exc)
    raise AssertionError("unreachable")
