"""The alert loop: derive alert state from the store, then push it (one tick).

Every tick (at most every 5 s, more often only when the resend interval is shorter) runs on a
database thread: open the alerts new real predictions call for, track nodes that left the scrape
targets (closing their alert after the grace period), and read the open alerts and the closes
not yet acknowledged. Then it pushes what is due to each Alertmanager and records what was
accepted. Because the state is re-read from the store each tick, a restart loses nothing and an
operator's resolve (a store write by the API) is pushed within one tick.

The loop runs as its own EvaluatorApp loop, so a slow Alertmanager never delays the prediction
worker or the ingest loop, and the app's single catch-all logs and counts a failed tick
(``gpu_health_evaluator_loop_errors_total{loop="alerts"}``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Final

import aiohttp
from prometheus_client import CollectorRegistry

from gpu_health.clock import Clock
from gpu_health.evaluator.alerts.alert_metrics import AlertMetrics
from gpu_health.evaluator.alerts.pusher import Pusher, PushReport
from gpu_health.evaluator.model import CardSlot
from gpu_health.evaluator.outbound import ClientOptions, client_session
from gpu_health.evaluator.rules.actions import CardActions, Recommendation
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.operations.alerts import (
    SYSTEM_ACTOR,
    AlertView,
    close_removed_nodes,
    closing_alerts,
    mark_sent,
    open_alerts,
    open_new_alerts,
)

if TYPE_CHECKING:
    from datetime import datetime

    from gpu_health.evaluator.config.alerting import AlertingConfig

log = logging.getLogger(__name__)

TICK_MAX_SECONDS: Final = 5.0
RESOLVED_HORIZON: Final = timedelta(hours=1)

# The target nodes discovery currently knows, or None while discovery is not ready (then no
# node counts as removed: an empty list at start-up must not start the removal grace period).
PresentNodes = Callable[[], Collection[str] | None]


@dataclass(frozen=True, slots=True)
class AlertState:
    """What one sync found: open alerts, closes to push, alerts opened and closed by it."""

    open: tuple[AlertView, ...]
    closing: tuple[AlertView, ...]
    opened: tuple[tuple[str, str, str], ...]  # (alert id, node, prediction id)
    removed: tuple[tuple[str, str], ...]  # (alert id, node) closed for node removal


def sync(db: Database, now: datetime, present: Collection[str] | None, grace: timedelta,
         horizon: timedelta) -> AlertState:
    """One store pass (blocking; run it on a database thread)."""
    opened = open_new_alerts(db, now)
    removed = close_removed_nodes(db, present, grace=grace, now=now) if present is not None \
        else []
    return AlertState(tuple(open_alerts(db, now)), tuple(closing_alerts(db, now, horizon)),
                      tuple(opened), tuple(removed))


def with_actions(state: AlertState, actions: Mapping[CardSlot, Recommendation]
                 ) -> AlertState:
    """The open alerts with their card's recommended action (pure); a card the actions do not
    cover keeps none (the payload then says "unknown")."""
    opened = []
    for alert in state.open:
        rec = None if alert.gpu_index is None else actions.get((alert.node_id, alert.gpu_index))
        opened.append(alert if rec is None else replace(
            alert, action=f"{rec.action}: {rec.reason} (recommended by {rec.policy}, not a "
                          "diagnosis)"))
    return replace(state, open=tuple(opened))




class AlertLoop:
    """Owns the pusher, its HTTP session and the alert self-metrics."""

    def __init__(self, db: Database, config: AlertingConfig, *, external_url: str, clock: Clock,
                 registry: CollectorRegistry, present_nodes: PresentNodes,
                 node_registry: CollectorRegistry | None = None,
                 actions: CardActions | None = None) -> None:
        # The recommended action annotated on each alert (docs/actions.md), read from the
        # /metrics snapshot that computes it anyway, never queried again on this 5 s loop.
        self.actions = actions
        self.db = db
        self.config = config
        self.clock = clock
        self.present_nodes = present_nodes
        self.resend = timedelta(seconds=config.resend_interval)
        self.grace = timedelta(seconds=config.node_removal_grace)
        self.horizon = max(RESOLVED_HORIZON, 4 * self.resend)
        self.metrics = AlertMetrics(registry, clock, timedelta(seconds=config.backlog_after),
                                    config.alertmanagers, node_registry)
        self.pusher = Pusher(config.alertmanagers, resend_interval=self.resend,
                             timeout=config.timeout, external_url=external_url,
                             metrics=self.metrics)
        self.last_state: AlertState | None = None
        self._session: aiohttp.ClientSession | None = None
        self._seen_closed: set[str] = set()
        if not config.alertmanagers:
            log.warning("alerting.alertmanagers is empty: GPU_FAULT_PREDICTED alerts are tracked "
                        "in the store and /metrics but pushed nowhere")

    @property
    def interval(self) -> float:
        """Seconds between ticks."""
        return min(TICK_MAX_SECONDS, self.config.resend_interval)

    async def tick(self) -> PushReport:
        now = self.clock()
        state = await self.db.run(sync, self.db, now, self.present_nodes(), self.grace,
                                  self.horizon)
        if self.actions is not None and state.open:
            state = with_actions(state, self.actions())
        self.last_state = state
        self._record(state)
        if self._session is None:
            self._session = client_session(ClientOptions(connect_timeout=self.config.timeout))
        report = await self.pusher.push(self._session, state.open, state.closing, now)
        if report.sent or report.ended:
            await self.db.run(mark_sent, self.db, report.sent, report.ended, now)
        return report

    def _record(self, state: AlertState) -> None:
        for alert_id, node, prediction in state.opened:
            log.warning("GPU_FAULT_PREDICTED opened for node %s (alert %s, prediction %s)",
                        node, alert_id, prediction)
            self.metrics.opened.inc()
        self.metrics.set_open((a.node_id, a.opened_at) for a in state.open)
        for alert in state.closing:
            if alert.id in self._seen_closed:
                continue
            by = "node_removed" if alert.closed_by == SYSTEM_ACTOR else "operator"
            log.info("GPU_FAULT_PREDICTED for node %s closed by %s: %s", alert.node_id,
                     alert.closed_by, alert.close_reason)
            self.metrics.closed.labels(by).inc()
        self._seen_closed = {a.id for a in state.closing}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
