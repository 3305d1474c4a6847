"""The process host: background loops, readiness and the HTTP server. It wires nothing.

``gpu_health.evaluator.compose`` builds every part and hands the host what to run:

- ``add_loop(name, interval_s, tick)``: ``tick`` (an async callable) runs every ``interval_s``
  on a fixed grid under the single catch-all of every loop tick, which logs and counts
  ``gpu_health_evaluator_loop_errors_total{loop,reason}`` (reason from ``GpuHealthError``,
  ``internal`` for a bug) and goes on. ``at_start=True`` runs one tick during start-up, before
  the server answers; ``stuck_after`` makes /healthz fail when the loop has not finished a tick
  for that long;
- ``add_background(name, factory)``: any other coroutine, started on start-up, cancelled on
  shutdown;
- ``on_start(hook)`` / ``on_stop(hook)``: async hooks run in order on start-up (before the
  at-start ticks, or after them with ``after_ticks=True``), in reverse order on shutdown (each
  stop hook runs even when another failed);
- ``add_ready_check(name, fn)``: ``fn() -> str | None`` (None: ready) for /readyz;
  ``add_fact(name, fn)``: a value /readyz shows beside them (the leader's identity).

``web_app`` carries the one error middleware and the access check; compose puts every route
on it in one call (``gpu_health.evaluator.http.site.add_routes``). ``run_tick(name)`` runs one
tick of a loop under its catch-all (the demo and the tests use it instead of waiting).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from gpu_health.errors import GpuHealthError
from gpu_health.evaluator.config.api import ApiConfig
from gpu_health.evaluator.http.access import new_application, open_mode, unruled_routes
from gpu_health.evaluator.http.api.auth import TokenSet
from gpu_health.evaluator.http.errors import RequestMetrics
from gpu_health.evaluator.http.throttle import FailureThrottle
from gpu_health.evaluator.selfmetrics import SelfMetrics
from gpu_health.webguard import WebGuard

log = logging.getLogger(__name__)

LoopTick = Callable[[], Awaitable[object]]
Hook = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Loop:
    name: str
    interval: float
    tick: LoopTick
    at_start: bool = False
    stuck_after: float | None = None
    priority: bool = False  # ticks before the read API's turns (see ``priority``)


class EvaluatorApp:
    """Hosts one evaluator process's loops and web application (aiohttp cleanup_ctx)."""

    def __init__(self, *, registry: CollectorRegistry | None = None,
                 metrics: SelfMetrics | None = None, start_loops: bool = True,
                 tokens: TokenSet | None = None, listen_host: str = "127.0.0.1",
                 guard: WebGuard | None = None, api: ApiConfig | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        # Series that name nodes (or count over every tenant's nodes): docs/security.md.
        self.node_registry = CollectorRegistry()
        self.open_mode = open_mode(tokens, listen_host)
        self.metrics = metrics if metrics is not None else SelfMetrics(self.registry,
                                                                       self.node_registry)
        self.start_loops = start_loops
        self.started = False
        self.loop_ticks: dict[str, float] = {}  # loop name -> event-loop time of last tick end
        self.loops_started_at: float | None = None
        self._loops: dict[str, Loop] = {}
        self._background: list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]] = []
        self._ready_checks: list[tuple[str, Callable[[], str | None]]] = []
        self._facts: list[tuple[str, Callable[[], object]]] = []
        # Held around every tick of a priority loop (ingest, worker): compose sets the API
        # gate's, so no new API request starts at the store while such a tick runs.
        self.priority: Callable[[], AbstractAsyncContextManager[None]] = nullcontext
        self._start_hooks: list[Hook] = []
        self._started_hooks: list[Hook] = []
        self._stop_hooks: list[Hook] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.web_app = new_application(RequestMetrics(self.registry), tokens=tokens,
                                       listen_host=listen_host, guard=guard,
                                       throttle=FailureThrottle.configured(
                                           self.registry, api or ApiConfig()))
        self.web_app.cleanup_ctx.append(self._lifecycle)

    # -- what compose registers ---------------------------------------------------------------

    def add_loop(self, name: str, interval_s: float, tick: LoopTick, *, at_start: bool = False,
                 stuck_after: float | None = None, priority: bool = False) -> None:
        self._loops[name] = Loop(name, interval_s, tick, at_start, stuck_after, priority)

    def add_background(self, name: str, factory: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._background.append((name, factory))

    def add_ready_check(self, name: str, check: Callable[[], str | None]) -> None:
        self._ready_checks.append((name, check))

    def add_fact(self, name: str, fact: Callable[[], object]) -> None:
        """A value /readyz shows beside the checks (e.g. which evaluator leads)."""
        self._facts.append((name, fact))

    def facts(self) -> dict[str, object]:
        return {name: fact() for name, fact in self._facts}

    def on_start(self, hook: Hook, *, after_ticks: bool = False) -> None:
        (self._started_hooks if after_ticks else self._start_hooks).append(hook)

    def on_stop(self, hook: Hook) -> None:
        self._stop_hooks.append(hook)

    # -- state --------------------------------------------------------------------------------

    @property
    def loops(self) -> Mapping[str, Loop]:
        """The registered loops by name (what runs, how often)."""
        return MappingProxyType(self._loops)

    def readiness(self) -> dict[str, str | None]:
        """Each check -> None when fine, else why not ready."""
        checks: dict[str, str | None] = {}
        for name, check in self._ready_checks:
            try:
                checks[name] = check()
            except Exception as exc:  # a broken check must not break /readyz itself
                checks[name] = f"check failed: {exc}"
        return checks

    def stuck_loop(self) -> str | None:
        """Why /healthz fails: a loop with a liveness limit that has not ticked within it."""
        if not self.start_loops or self.loops_started_at is None:
            return None
        now = asyncio.get_running_loop().time()
        for loop in self._loops.values():
            if loop.stuck_after is None:
                continue
            age = now - self.loop_ticks.get(loop.name, self.loops_started_at)
            if age > loop.stuck_after:
                return (f"the {loop.name} loop has not finished a cycle for {age:.0f}s "
                        f"(limit {loop.stuck_after:.0f}s)")
        return None

    # -- lifecycle ----------------------------------------------------------------------------

    async def _lifecycle(self, _app: web.Application) -> AsyncIterator[None]:
        await self.open()
        try:
            yield
        finally:
            await self.close()

    async def open(self) -> None:
        """Run the start hooks and the at-start ticks, then start the loops."""
        missing = unruled_routes(self.web_app)
        if missing:  # a programming error: every route must say who may call it
            raise GpuHealthError(f"routes without an access rule: {', '.join(missing)}",
                                 reason="no_access_rule")
        for hook in self._start_hooks:
            await hook()
        for loop in self._loops.values():
            if loop.at_start:
                await self.run_tick(loop.name)
        for hook in self._started_hooks:
            await hook()
        self.started = True
        if self.start_loops:
            self.loops_started_at = asyncio.get_running_loop().time()
            for loop in self._loops.values():
                self._spawn(loop.name, self._periodic(loop))
            for name, factory in self._background:
                self._spawn(name, factory())

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for hook in reversed(self._stop_hooks):
            try:
                await hook()
            except Exception:  # one failing stop hook must not keep the others from running
                log.exception("shutdown step failed")
        self.started = False

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro, name=name))

    async def run_tick(self, name: str) -> None:
        """Run one tick of loop ``name`` under the loop's single catch-all."""
        loop = self._loops[name]
        try:
            async with self.priority() if loop.priority else nullcontext():
                await loop.tick()
        except Exception as exc:  # the one catch-all of every loop tick
            reason = exc.reason if isinstance(exc, GpuHealthError) else "internal"
            log.error("%s loop tick failed (%s): %s", name, reason, exc,
                      exc_info=not isinstance(exc, GpuHealthError))
            self.metrics.loop_error(name, reason)
        self.loop_ticks[name] = asyncio.get_running_loop().time()

    async def _periodic(self, loop: Loop) -> None:
        """Tick every ``interval`` seconds on a fixed grid; an overrun skips the missed slots."""
        clock = asyncio.get_running_loop()
        next_at = clock.time() + (loop.interval if loop.at_start else 0.0)
        while True:
            delay = next_at - clock.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.run_tick(loop.name)
            next_at += loop.interval
            behind = clock.time() - next_at
            if behind > 0:
                next_at += loop.interval * (int(behind // loop.interval) + 1)
