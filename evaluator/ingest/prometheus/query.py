"""Range queries on the Prometheus HTTP API (Prometheus, Thanos Querier, Mimir, VictoriaMetrics).

Only ``GET <base>/api/v1/query_range`` with ``query``, ``start``, ``end`` (Unix seconds) and
``step`` (seconds) is used: every Prometheus-compatible server answers it the same way
(``{"status": "success", "data": {"resultType": "matrix", "result": [...]}}``).

Prometheus refuses a range query of more than 11,000 points per series (HTTP 400, ``bad_data``,
"exceeded maximum resolution of 11,000 points per timeseries", captured from 2.42.0); callers cut
their period into chunks of at most ``max_points`` steps, and a chunk that is still refused is
split in half and retried.

Every answer is bounded: the body by ``max_bytes`` (a query matching far more series than meant,
e.g. a selector typo, must not exhaust memory), the series by ``max_series`` (like Prometheus's
own ``sample_limit``), the time by the session's timeout. Each failure is a
:class:`~gpu_health.errors.SourceError` whose ``reason`` says which (the error counter's label):
``unreachable``, ``timeout``, ``http_error``, ``bad_response``, ``too_large``,
``too_many_series``. The message names the server and the query, never the credentials.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import aiohttp

from gpu_health.errors import SourceError

DEFAULT_MAX_BYTES: Final = 512 * 1024 * 1024
DEFAULT_MAX_SERIES: Final = 1_000_000
_READ: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class QueryLimits:
    step: timedelta
    concurrency: int = 4
    max_bytes: int = DEFAULT_MAX_BYTES
    max_series: int = DEFAULT_MAX_SERIES


@dataclass(slots=True)
class QueryStats:
    """What the client did (the import's summary and the live source's self-metrics)."""

    requests: int = 0
    splits: int = 0
    points: int = 0
    series: int = 0
    seconds: float = 0.0


def chunks(since: datetime, until: datetime, step: timedelta,
           points: int) -> list[tuple[datetime, datetime]]:
    """``[start, end]`` pieces of at most ``points`` steps each, on the grid from ``since``."""
    result = []
    start = since
    while start <= until:
        end = min(until, start + (points - 1) * step)
        result.append((start, end))
        start = end + step
    return result


def _is_resolution_error(status: int, body: Any) -> bool:
    return (status == 400 and isinstance(body, dict) and body.get("errorType") == "bad_data"
            and "maximum resolution" in str(body.get("error", "")))


class RangeQuerier:
    """``query_range`` over one session, at most ``limits.concurrency`` requests at a time."""

    def __init__(self, session: aiohttp.ClientSession, url: str, limits: QueryLimits,
                 stats: QueryStats | None = None,
                 observe: Callable[[float], None] | None = None) -> None:
        self.session = session
        self.url = url.rstrip("/")
        self.limits = limits
        self.stats = stats if stats is not None else QueryStats()
        self.observe = observe  # called with each request's duration
        self._slots = asyncio.Semaphore(limits.concurrency)

    async def query_range(self, query: str, start: datetime, end: datetime) -> list[Any]:
        """The matrix of ``query`` over ``[start, end]``, splitting on the resolution error."""
        step = self.limits.step
        status, body = await self._get(query, start, end)
        if _is_resolution_error(status, body):
            if start >= end:
                raise SourceError(f"{self.url} refused even one step of {query!r}: "
                                  f"{body.get('error')}", reason="http_error")
            self.stats.splits += 1
            mid = start + ((end - start) // step // 2) * step
            return [*await self.query_range(query, start, mid),
                    *await self.query_range(query, mid + step, end)]
        if status != 200 or not isinstance(body, dict) or body.get("status") != "success":
            detail = (f"{body.get('errorType')}: {body.get('error')}" if isinstance(body, dict)
                      else "not JSON")
            raise SourceError(f"{self.url} answered HTTP {status} to query_range {query!r}: "
                              f"{detail}", reason="http_error")
        data = body.get("data") or {}
        result = data.get("result") if isinstance(data, dict) else None
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise SourceError(f"{self.url} answered query_range {query!r} with "
                              f"{data.get('resultType')!r}, not a matrix", reason="bad_response")
        if len(result) > self.limits.max_series:
            raise SourceError(f"{self.url}: {query!r} matched {len(result)} series, more than "
                              f"the limit {self.limits.max_series}", reason="too_many_series")
        self.stats.series += len(result)
        self.stats.points += sum(len(s.get("values") or ()) for s in result
                                 if isinstance(s, dict))
        return result

    async def _get(self, query: str, start: datetime, end: datetime) -> tuple[int, Any]:
        params = {"query": query, "start": f"{start.timestamp():.3f}",
                  "end": f"{end.timestamp():.3f}",
                  "step": f"{self.limits.step.total_seconds():g}"}
        async with self._slots:
            self.stats.requests += 1
            began = time.perf_counter()
            try:
                async with self.session.get(self.url + "/api/v1/query_range",
                                            params=params) as response:
                    status, raw = response.status, await self._body(response, query)
            except TimeoutError as exc:
                raise SourceError(f"{self.url} did not answer query_range {query!r} in time",
                                  reason="timeout") from exc
            except aiohttp.ClientError as exc:
                raise SourceError(f"cannot query {self.url}: {type(exc).__name__}: {exc}",
                                  reason="unreachable") from exc
            finally:
                elapsed = time.perf_counter() - began
                self.stats.seconds += elapsed
                if self.observe is not None:
                    self.observe(elapsed)
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, None

    async def _body(self, response: aiohttp.ClientResponse, query: str) -> bytes:
        """The whole body, refused beyond ``max_bytes`` (counted decompressed)."""
        limit = self.limits.max_bytes
        if (response.content_length or 0) > limit:
            raise self._too_large(query)
        parts, size = [], 0
        async for part in response.content.iter_chunked(_READ):
            size += len(part)
            if size > limit:
                raise self._too_large(query)
            parts.append(part)
        return b"".join(parts)

    def _too_large(self, query: str) -> SourceError:
        return SourceError(f"{self.url}: the answer to {query!r} is larger than "
                           f"{self.limits.max_bytes} bytes", reason="too_large")
