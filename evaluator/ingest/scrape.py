"""Scraping exporters over HTTP (aiohttp): bounded concurrency, per-target timeout, size cap.

Every target ends in a :class:`ScrapeResult`, never in an exception: a dead, slow, huge or
malformed target is one failed result with a low-cardinality ``reason`` and a message, and it
cannot delay the others beyond holding one of ``max_concurrency`` slots for at most ``timeout``
(the timeout starts when the slot is acquired, so queued targets are not charged for waiting).

The size cap counts *decompressed* bytes (a small gzip body can expand a thousandfold), and a
``Content-Length`` above the cap is refused before reading. The body must be UTF-8 text in the
Prometheus text format; it is parsed right here, so ``duration`` covers fetch and parse (a
target whose contract lines did not change since its last scrape reuses their cards:
:mod:`gpu_health.evaluator.ingest.parse_memo`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import aiohttp

from gpu_health.clock import Clock
from gpu_health.errors import GpuHealthError, ScrapeError
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cards import CardExtraction
from gpu_health.evaluator.ingest.parse_memo import ParseMemo
from gpu_health.evaluator.outbound import ClientOptions, client_session

log = logging.getLogger(__name__)

# Ask for the classic text format: prometheus_client answers OpenMetrics when that is preferred.
ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class ScrapeResult:
    """The outcome of scraping one target once."""

    target: Target
    scraped_at: datetime
    duration: float
    extraction: CardExtraction = field(default_factory=CardExtraction)
    error_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_reason is None


class Scraper:
    """Owns one aiohttp session (connection reuse across cycles); use ``async with``."""

    def __init__(self, *, timeout: float, max_concurrency: int, max_response_bytes: int,
                 clock: Clock, sample_limit: int | None = None,
                 max_cards: int | None = None) -> None:
        self.timeout = timeout
        self.sample_limit = sample_limit
        self.max_cards = max_cards
        self.max_response_bytes = max_response_bytes
        self.clock = clock
        self._limit = asyncio.Semaphore(max_concurrency)
        self._max_concurrency = max_concurrency
        self._session: aiohttp.ClientSession | None = None
        self.memo = ParseMemo()  # each target's cards of last time, by digest

    async def __aenter__(self) -> Scraper:
        # No session-wide total: each scrape is bounded by its own ``asyncio.timeout``.
        self._session = client_session(ClientOptions(
            connect_timeout=self.timeout, max_connections=self._max_concurrency,
            headers={"Accept": ACCEPT, "Accept-Encoding": "gzip"}))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def scrape_all(self, targets: Sequence[Target]) -> list[ScrapeResult]:
        """Scrape every target concurrently; results in the order of ``targets``.

        ``max_concurrency`` workers take the targets in turn: one task per target made 20,000
        tasks in one step of the event loop and held /healthz for seconds."""
        results: list[ScrapeResult | None] = [None] * len(targets)
        queue = iter(enumerate(targets))  # shared: each worker takes the next target

        async def worker() -> None:
            for i, target in queue:
                results[i] = await self.scrape(target)

        await asyncio.gather(*(worker() for _ in range(min(self._max_concurrency,
                                                             len(targets)))))
        self.memo.retain({t.url for t in targets})
        return [r for r in results if r is not None]

    async def scrape(self, target: Target) -> ScrapeResult:
        """Scrape one target. Never raises (except cancellation): failures become results."""
        async with self._limit:
            scraped_at = self.clock()
            started = time.perf_counter()
            try:
                body = await self._fetch(target)
                extraction = self.memo.parse(target.url, body, sample_limit=self.sample_limit,
                                             max_cards=self.max_cards)
            except Exception as exc:  # the one catch-all per target: record, never propagate
                reason, message = _describe(exc, self.timeout)
                log.debug("scrape of %s failed (%s): %s", target.url, reason, message)
                return ScrapeResult(target, scraped_at, time.perf_counter() - started,
                                    error_reason=reason, error=message)
            return ScrapeResult(target, scraped_at, time.perf_counter() - started, extraction)

    async def _fetch(self, target: Target) -> str:
        if self._session is None:
            raise ScrapeError("scraper is not started", reason="internal")
        async with (
            asyncio.timeout(self.timeout),
            self._session.get(target.url, allow_redirects=False) as response,
        ):
            if response.status != 200:
                raise ScrapeError(f"HTTP {response.status} {response.reason}",
                                  reason="http_status")
            declared = response.content_length
            if declared is not None and declared > self.max_response_bytes:
                raise ScrapeError(f"Content-Length {declared} exceeds the cap of "
                                  f"{self.max_response_bytes} bytes", reason="too_large")
            body = await read_capped(response, self.max_response_bytes)
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScrapeError(f"body is not UTF-8: {exc}", reason="encoding") from exc


async def read_capped(response: aiohttp.ClientResponse, cap: int) -> bytes:
    """The whole (decompressed) body, or ScrapeError ``too_large`` as soon as it passes ``cap``."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > cap:
            raise ScrapeError(f"body exceeds the cap of {cap} bytes", reason="too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def _describe(exc: BaseException, timeout: float) -> tuple[str, str]:
    """(reason label, human message) for a failed scrape."""
    if isinstance(exc, TimeoutError):
        return "timeout", f"no complete response within {timeout:g}s"
    if isinstance(exc, GpuHealthError):
        return exc.reason, str(exc)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connection", str(exc)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "payload", str(exc)
    if isinstance(exc, aiohttp.ClientError):
        return "http_client", f"{type(exc).__name__}: {exc}"
    log.error("unexpected scrape failure", exc_info=exc)
    return "internal", f"{type(exc).__name__}: {exc}"
