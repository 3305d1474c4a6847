"""The collection loop: one tick every interval, every vendor in parallel, into the cache.

Vendors run side by side (a hanging tool costs its own timeout, not the others'). Each vendor's
part of a tick has exactly one catch-all: whatever goes wrong there is logged and counted by
``reason`` in the vendor's error counter, and the loop carries on. A tool that was never found
disables its vendor (logged once); a tool that vanishes after having worked is a failure.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime

from gpu_health.clock import Clock
from gpu_health.errors import GpuHealthError, ToolNotFound

from .cache import ReadingCache
from .sources import VendorSource
from .tool_output import duplicate_uuids

log = logging.getLogger(__name__)


class CollectionLoop:
    """Ticks every ``interval_s``: all sources in parallel, results into the cache."""

    def __init__(
        self,
        sources: Sequence[VendorSource],
        cache: ReadingCache,
        clock: Clock,
        interval_s: float,
        after_tick: Callable[[], None] | None = None,
    ) -> None:
        self.sources = tuple(sources)
        self.cache = cache
        self.clock = clock
        self.interval_s = interval_s
        self.after_tick = after_tick
        self.last_tick_at: datetime | None = None
        self.started_at: datetime | None = None
        for source in self.sources:
            cache.register(source.vendor, source.error_reasons)
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, len(self.sources)), thread_name_prefix="collect"
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> None:
        """Collect every vendor once (in parallel) and wait for all of them."""
        now = self.clock()
        list(self._pool.map(lambda source: self._collect(source, now), self.sources))
        self.last_tick_at = now

    def _collect(self, source: VendorSource, now: datetime) -> None:
        started = time.perf_counter()
        try:
            output = source.collect(now)
        except ToolNotFound as exc:
            self._missing(source, exc, time.perf_counter() - started)
        except Exception as exc:  # the one catch-all of this vendor's part of the tick
            reason = exc.reason if isinstance(exc, GpuHealthError) else "internal"
            if isinstance(exc, GpuHealthError):
                log.warning("%s collection failed (%s): %s", source.vendor, reason, exc)
            else:
                log.exception("%s collection crashed (bug)", source.vendor)
            self.cache.record_failure(source.vendor, reason, time.perf_counter() - started)
        else:
            output = replace(output, failures=(*output.failures,
                                               *duplicate_uuids(output.readings)))
            for anomaly in output.anomalies:
                log.warning("%s: %s", source.vendor, anomaly)
            for failure in output.failures:
                log.warning("%s: part of the collection failed (%s): %s",
                            source.vendor, failure.reason, failure.message)
            self.cache.record_success(source.vendor, output, now, time.perf_counter() - started)

    def _missing(self, source: VendorSource, exc: ToolNotFound, duration_s: float) -> None:
        if self.cache.was_enabled(source.vendor):
            log.warning("%s tool disappeared: %s", source.vendor, exc)
            self.cache.record_failure(source.vendor, exc.reason, duration_s)
        elif self.cache.mark_absent(source.vendor):
            log.info("%s disabled: %s (set %s to its path to enable)",
                     source.vendor, exc, source.flag)

    def start(self) -> None:
        """Tick now and then every ``interval_s`` in a daemon thread, until :meth:`stop`."""
        self.started_at = self.clock()
        self._thread = threading.Thread(target=self._run, name="collection-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.tick()
            if self.after_tick is not None:
                try:
                    self.after_tick()
                except Exception:  # the output step's one catch-all; collection goes on
                    log.exception("writing the tick's output failed")
            next_at += self.interval_s
            # An overrunning tick starts the next one at once instead of bursting to catch up.
            next_at = max(next_at, time.monotonic())
            self._stop.wait(next_at - time.monotonic())

    def stop(self, timeout_s: float | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def health(self, now: datetime, stale_after_s: float) -> tuple[bool, str]:
        """(healthy, why): the loop runs and its last tick (or its start) is recent."""
        if self._thread is None or not self._thread.is_alive():
            return False, "collection loop is not running"
        last = self.last_tick_at or self.started_at
        if last is not None and (now - last).total_seconds() > stale_after_s:
            return False, f"no collection tick finished since {last.isoformat()}"
        return True, "ok"
