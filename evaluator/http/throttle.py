"""A per-client limit on failed authentications (1,000 wrong tokens were tried at
1,476/s, nothing slowed them down).

A client (its address as the server sees it) with ``limit`` failed authentications (401) within
``window`` seconds (``api.auth_failure_limit``, ``api.auth_failure_window``) is answered ``429``
with ``Retry-After`` for every route that needs a credential, until its oldest failure in the
window is older than the window. Public routes (/healthz, /readyz, /metrics, /) are never
throttled. Bounded: at most ``max_clients`` addresses
are remembered (the least recently failed are forgotten first). Behind a reverse proxy every
client shares the proxy's address, so the limit then applies to them together.
Counted in ``gpu_health_evaluator_auth_throttled_total``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter

from gpu_health.errors import ApiError
from gpu_health.evaluator.config.api import ApiConfig
from gpu_health.logins import RecentFailures

T = TypeVar("T")
LIMIT = ApiConfig().auth_failure_limit  # api.auth_failure_limit's default
WINDOW_S = ApiConfig().auth_failure_window  # api.auth_failure_window's default
MAX_CLIENTS = 10_000


class FailureThrottle:
    def __init__(self, registry: CollectorRegistry, *, limit: int = LIMIT,
                 window_s: float = WINDOW_S, max_clients: int = MAX_CLIENTS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_clients = max_clients
        self.clock = clock
        self._failures = RecentFailures(limit, window_s, max_clients)
        self.throttled = Counter("gpu_health_evaluator_auth_throttled", "Requests answered 429 "
                                 "because their client failed to authenticate too often",
                                 registry=registry)

    @classmethod
    def configured(cls, registry: CollectorRegistry, limits: ApiConfig) -> FailureThrottle:
        return cls(registry, limit=limits.auth_failure_limit,
                   window_s=limits.auth_failure_window)

    def check(self, client: str) -> None:
        """Raise ApiError(429) while ``client`` is over the limit."""
        now = self.clock()
        if self._failures.count(client, now) < self.limit:
            return
        wait = self._failures.retry_after(client, now)
        self.throttled.inc()
        raise ApiError(429, f"too many failed authentications from this client "
                       f"({self.limit} within {self.window_s:g}s): retry later",
                       retry_after=max(1, math.ceil(wait)))

    async def attempt(self, client: str, auth: Callable[[], Awaitable[T]]) -> T:
        """Run ``auth`` unless ``client`` is throttled (429); count its 401 against it."""
        self.check(client)
        try:
            return await auth()
        except ApiError as exc:
            if exc.status == 401:
                self.failed(client)
            raise

    def failed(self, client: str) -> None:
        """Note one failed authentication of ``client``."""
        self._failures.add(client, self.clock())
