"""The alert loop end to end on one process: store -> payload -> real HTTP pushes to stand-in
Alertmanagers on 127.0.0.1, with an injected clock (resend cadence, per-Alertmanager backoff,
resolved pushes until acknowledged, node removal, self-metrics)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Collection, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from gpu_health.evaluator.alerts.alert_loop import AlertLoop
from gpu_health.evaluator.alerts.pusher import backoff
from gpu_health.evaluator.config.alerting import AlertingConfig
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.operations.alerts import closing_alerts, resolve_alert
from tests.conftest import NewDb
from tests.evaluator.api_support import NOW, add_node, add_prediction
from tests.evaluator.ingest_support import FakeClock

RESEND = 60.0


class FakeAlertmanager:
    """Records every POST /api/v2/alerts body; answers ``status`` after ``delay`` seconds."""

    def __init__(self) -> None:
        self.bodies: list[list[dict[str, Any]]] = []
        self.status = 200
        self.delay = 0.0
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()

    async def _post(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        if self.delay:  # a slow Alertmanager; close() releases it so teardown is quick
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._release.wait(), self.delay)
        return web.Response(status=self.status, text="" if self.status == 200 else "nope")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/prefix/api/v2/alerts", self._post)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/prefix/"

    async def close(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def ams() -> AsyncIterator[tuple[FakeAlertmanager, FakeAlertmanager]]:
    pair = (FakeAlertmanager(), FakeAlertmanager())
    for am in pair:
        await am.start()
    yield pair
    for am in pair:
        await am.close()


@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    database = new_db("push")
    add_node(database, "n1", "team-a")
    add_prediction(database, "p1", "n1", 0, NOW - timedelta(hours=1))
    yield database
    database.close()


def make_loop(db: Database, urls: list[str], clock: FakeClock, *,
              present: Collection[str] | None = ("n1",), timeout: float = 5.0,
              registry: CollectorRegistry | None = None) -> AlertLoop:
    config = AlertingConfig(alertmanagers=tuple(urls), resend_interval=RESEND, timeout=timeout,
                            node_removal_grace=3600.0, backlog_after=72 * 3600.0)
    return AlertLoop(db, config, external_url="http://evaluator.example:10347", clock=clock,
                     registry=registry or CollectorRegistry(), present_nodes=lambda: present)


def metric(registry: CollectorRegistry, line_start: str) -> float | None:
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith(line_start + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def ends_at(body: list[dict[str, Any]]) -> datetime:
    return datetime.fromisoformat(body[0]["endsAt"].replace("Z", "+00:00"))


async def test_new_alert_goes_to_every_alertmanager_then_once_per_resend_interval(
    db: Database, ams: tuple[FakeAlertmanager, FakeAlertmanager]
) -> None:
    clock = FakeClock(NOW)
    loop = make_loop(db, [am.url for am in ams], clock)
    try:
        report = await loop.tick()
        assert report.results == {ams[0].url: "ok", ams[1].url: "ok"}
        for am in ams:
            [body] = am.bodies
            assert body[0]["labels"] == {"alertname": "GPU_FAULT_PREDICTED", "node": "n1",
                                         "severity": "warning", "tenant": "team-a"}
            assert ends_at(body) == NOW + timedelta(seconds=4 * RESEND)
        clock.advance(seconds=RESEND - 1)
        assert (await loop.tick()).results == {}  # not due yet
        clock.advance(seconds=1)
        await loop.tick()
        assert [len(am.bodies) for am in ams] == [2, 2]
        assert ends_at(ams[0].bodies[1]) == clock() + timedelta(seconds=4 * RESEND)
        assert ams[0].bodies[1][0]["startsAt"] == ams[0].bodies[0][0]["startsAt"]
    finally:
        await loop.close()


async def test_a_failing_alertmanager_backs_off_alone(
    db: Database, ams: tuple[FakeAlertmanager, FakeAlertmanager]
) -> None:
    good, bad = ams
    bad.status = 503
    clock, registry = FakeClock(NOW), CollectorRegistry()
    loop = make_loop(db, [good.url, bad.url], clock, registry=registry)
    try:
        attempts_at: list[datetime] = []
        for _ in range(40):  # 40 s of ticks, one per second
            report = await loop.tick()
            if bad.url in report.results:
                attempts_at.append(clock())
            clock.advance(seconds=1)
        offsets = [(t - NOW).total_seconds() for t in attempts_at]
        assert offsets == [0, 1, 3, 7, 15, 31]  # 1 s, 2 s, 4 s, 8 s, 16 s apart
        assert len(good.bodies) == 1  # unaffected, and not re-sent before the interval
        up = f'gpu_health_evaluator_alertmanager_up{{alertmanager="{bad.url}"}}'
        assert metric(registry, up) == 0
        assert metric(registry, "gpu_health_evaluator_alert_pushes_total"
                      f'{{alertmanager="{bad.url}",result="http_5xx"}}') == 6
        bad.status = 200
        clock.advance(seconds=32)
        await loop.tick()
        assert metric(registry, up) == 1
    finally:
        await loop.close()
    assert backoff(30, timedelta(seconds=RESEND)) == timedelta(seconds=RESEND)


async def test_operator_resolve_is_pushed_until_every_alertmanager_acknowledges(
    db: Database, ams: tuple[FakeAlertmanager, FakeAlertmanager]
) -> None:
    good, flaky = ams
    clock = FakeClock(NOW)
    loop = make_loop(db, [good.url, flaky.url], clock)
    try:
        await loop.tick()
        clock.advance(seconds=10)
        resolve_alert(db, "n1", actor="oncall", reason="replaced", now=clock())
        flaky.status = 500
        await loop.tick()
        resolved_body = good.bodies[-1]
        assert ends_at(resolved_body) == clock()  # endsAt = close time: resolved in AM
        assert closing_alerts(db, clock(), timedelta(hours=1))  # flaky has not acknowledged
        flaky.status = 200
        clock.advance(seconds=5)
        await loop.tick()
        assert ends_at(flaky.bodies[-1]) == NOW + timedelta(seconds=10)
        assert closing_alerts(db, clock(), timedelta(hours=1)) == []
        counts = [len(good.bodies), len(flaky.bodies)]
        clock.advance(seconds=RESEND * 2)
        await loop.tick()
        assert [len(good.bodies), len(flaky.bodies)] == counts  # nothing open, nothing sent
    finally:
        await loop.close()


async def test_timeouts_and_refused_connections_are_bounded_and_counted(
    db: Database, ams: tuple[FakeAlertmanager, FakeAlertmanager]
) -> None:
    slow = ams[0]
    slow.delay = 5.0
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed_url = f"http://127.0.0.1:{s.getsockname()[1]}"
    loop = make_loop(db, [slow.url, closed_url], FakeClock(NOW), timeout=0.3)
    try:
        report = await asyncio.wait_for(loop.tick(), timeout=3)
        assert report.results == {slow.url: "timeout", closed_url: "connect"}
        assert report.sent == frozenset()
    finally:
        await loop.close()


async def test_node_removed_from_targets_is_closed_after_the_grace_period(
    db: Database, ams: tuple[FakeAlertmanager, FakeAlertmanager]
) -> None:
    clock, present = FakeClock(NOW), {"n1"}
    config = AlertingConfig(alertmanagers=(ams[0].url,), resend_interval=RESEND,
                            node_removal_grace=600.0)
    loop = AlertLoop(db, config, external_url="http://e:1", clock=clock,
                     registry=CollectorRegistry(), present_nodes=lambda: present)
    try:
        await loop.tick()
        present = set()
        await loop.tick()
        clock.advance(seconds=599)
        await loop.tick()
        assert loop.last_state is not None and loop.last_state.open
        clock.advance(seconds=1)
        await loop.tick()
        assert loop.last_state.open == () and loop.last_state.removed
        assert ends_at(ams[0].bodies[-1]) == clock()
    finally:
        await loop.close()


async def test_without_alertmanagers_state_and_metrics_are_still_kept(db: Database) -> None:
    clock, registry = FakeClock(NOW), CollectorRegistry()
    loop = make_loop(db, [], clock, registry=registry)
    assert metric(registry, "gpu_health_evaluator_alerts_open") is None  # unknown before a sync
    try:
        await loop.tick()
        assert metric(registry, "gpu_health_evaluator_alerts_open") == 1
        assert metric(registry, "gpu_health_evaluator_alerts_open_backlog") == 0
        clock.advance(hours=72, seconds=1)
        assert metric(registry, "gpu_health_evaluator_alerts_open_backlog") == 1
        assert metric(registry, 'gpu_health_evaluator_alert_open_age_seconds{node="n1"}') == \
            72 * 3600 + 1
    finally:
        await loop.close()


async def test_discovery_not_ready_never_counts_as_removal(db: Database) -> None:
    clock = FakeClock(NOW)
    loop = make_loop(db, [], clock, present=None)
    try:
        await loop.tick()
        clock.advance(hours=5)
        await loop.tick()
        assert loop.last_state is not None and len(loop.last_state.open) == 1
    finally:
        await loop.close()
