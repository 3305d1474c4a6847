"""The ``api`` section's load limits (docs/api.md, "Busy"): how many API requests use the store
at once, how many may wait, and for how long; and how many failed authentications a client may
make (docs/security.md). Every problem is recorded in the Checker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from evaluator.config.values import Checker

KEYS: Final = ("tokens_file", "max_concurrency", "max_queue", "queue_timeout", "timeout",
               "auth_failure_limit", "auth_failure_window")


@dataclass(frozen=True, slots=True)
class ApiLimits:
    # One: the store's pool has two threads, so one always stays free for the ingest cycle and
    # the worker (bench/api_load.py: with 200 clients the cycle took 0.85x its time alone at 1,
    # 2.15x at 2, 6-14x without a limit).
    max_concurrency: int = 1
    max_queue: int = 32
    queue_timeout: float = 5.0
    timeout: float = 30.0  # one request's store work; then 503 (a frozen database)
    # Failed authentications per client address within the window; then 429 (issue 27: 1,000
    # wrong tokens at 1,476/s). A person mistyping a token fails a few times, not 20 in 10 s.
    auth_failure_limit: int = 20
    auth_failure_window: float = 10.0


def parse_api_limits(c: Checker, api: Mapping[str, Any]) -> ApiLimits:
    d = ApiLimits()
    return ApiLimits(
        max_concurrency=c.integer(api, "max_concurrency", "api.max_concurrency",
                                  d.max_concurrency, 1, 64),
        max_queue=c.integer(api, "max_queue", "api.max_queue", d.max_queue, 0, 100_000),
        queue_timeout=c.duration(api, "queue_timeout", "api.queue_timeout", d.queue_timeout),
        timeout=c.duration(api, "timeout", "api.timeout", d.timeout),
        auth_failure_limit=c.integer(api, "auth_failure_limit", "api.auth_failure_limit",
                                     d.auth_failure_limit, 1, 100_000),
        auth_failure_window=c.duration(api, "auth_failure_window", "api.auth_failure_window",
                                       d.auth_failure_window),
    )
