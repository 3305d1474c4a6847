"""Pushes alerts to every configured Alertmanager (``POST <url>/api/v2/alerts``).

Each Alertmanager is handled on its own, as Prometheus's notifier does: a push goes to one when
it has not yet accepted an alert in its current state (a new alert, changed annotations do not
count, a close), or when the resend interval has passed since it last accepted a push. Every
push carries all open alerts (and the closes it has not acknowledged yet), so an Alertmanager
that restarted and lost its state has everything again within one resend interval.

A failed push (timeout, refused connection, non-2xx answer) backs off exponentially for that
Alertmanager only (1 s, 2 s, 4 s ... capped at the resend interval); the others are unaffected.
Pushes run concurrently with a bounded timeout each, in the alert loop's task, never in the
worker's or the ingest loop's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

import aiohttp

from gpu_health.evaluator.alerts import payload
from gpu_health.evaluator.alerts.alert_metrics import AlertMetrics
from gpu_health.evaluator.store.operations.alerts import AlertView

log = logging.getLogger(__name__)

BACKOFF_BASE: Final = timedelta(seconds=1)
MAX_ERROR_BODY: Final = 2048
FIRING: Final = "firing"
ACK_RESOLVED: Final = "resolved"


@dataclass(slots=True)
class _Target:
    """One Alertmanager and what it has accepted from this process."""

    url: str
    endpoint: str
    failures: int = 0
    retry_at: datetime | None = None
    last_ok: datetime | None = None
    acked: dict[str, str] = field(default_factory=dict)  # alert id -> firing | resolved


@dataclass(frozen=True, slots=True)
class PushReport:
    """``sent``: alerts at least one Alertmanager accepted now; ``ended``: closed alerts every
    Alertmanager has acknowledged (so far, in this process); ``results``: url -> result."""

    sent: frozenset[str]
    ended: frozenset[str]
    results: dict[str, str]


def endpoint(url: str) -> str:
    """``http://am:9093`` or ``http://host/prefix/`` -> ``.../api/v2/alerts``."""
    return url.rstrip("/") + "/api/v2/alerts"


def backoff(failures: int, cap: timedelta) -> timedelta:
    """Delay after the n-th consecutive failure: 1 s, 2 s, 4 s, ... at most ``cap``."""
    return min(BACKOFF_BASE * (2 ** min(max(failures - 1, 0), 30)), cap)


class Pusher:
    """Per-Alertmanager push state; ``push`` is one round over all of them."""

    def __init__(self, urls: Sequence[str], *, resend_interval: timedelta, timeout: float,
                 external_url: str, metrics: AlertMetrics) -> None:
        self.targets = [_Target(url, endpoint(url)) for url in urls]
        self.resend_interval = resend_interval
        self.timeout = timeout
        self.external_url = external_url
        self.metrics = metrics

    def _body(self, target: _Target, open_alerts: Sequence[AlertView],
              closing: Sequence[AlertView], now: datetime) -> list[dict[str, Any]] | None:
        """What to send to ``target`` now, or None when nothing is due."""
        if target.retry_at is not None and now < target.retry_at:
            return None
        unacked = [c for c in closing if target.acked.get(c.id) != ACK_RESOLVED]
        due = bool(unacked) or any(target.acked.get(a.id) != FIRING for a in open_alerts) or (
            bool(open_alerts) and (target.last_ok is None
                                   or now - target.last_ok >= self.resend_interval))
        if not due:
            return None
        body = [payload.firing(a, now=now, resend_interval=self.resend_interval,
                               external_url=self.external_url) for a in open_alerts]
        body += [payload.resolved(c, external_url=self.external_url) for c in unacked]
        return body

    async def push(self, session: aiohttp.ClientSession, open_alerts: Sequence[AlertView],
                   closing: Sequence[AlertView], now: datetime) -> PushReport:
        live = {a.id for a in open_alerts} | {c.id for c in closing}
        jobs: list[tuple[_Target, list[dict[str, Any]]]] = []
        for target in self.targets:
            target.acked = {k: v for k, v in target.acked.items() if k in live}
            body = self._body(target, open_alerts, closing, now)
            if body:
                jobs.append((target, body))
        results = await asyncio.gather(*(self._post(session, t, b) for t, b in jobs))
        sent: set[str] = set()
        outcome: dict[str, str] = {}
        for (target, body), result in zip(jobs, results, strict=True):
            outcome[target.url] = result
            self.metrics.push_result(target.url, result, now)
            if result == "ok":
                self._accepted(target, open_alerts, closing, now)
                sent |= {a.id for a in open_alerts} | {c.id for c in closing}
            else:
                target.failures += 1
                delay = backoff(target.failures, self.resend_interval)
                target.retry_at = now + delay
                log.warning("push of %d alert(s) to %s failed (%s, %d in a row); next try in %s",
                            len(body), target.url, result, target.failures, delay)
        ended = frozenset(c.id for c in closing
                          if all(t.acked.get(c.id) == ACK_RESOLVED for t in self.targets))
        return PushReport(frozenset(sent), ended, outcome)

    @staticmethod
    def _accepted(target: _Target, open_alerts: Sequence[AlertView],
                  closing: Sequence[AlertView], now: datetime) -> None:
        if target.failures:
            log.info("%s accepts pushes again after %d failure(s)", target.url, target.failures)
        target.failures, target.retry_at, target.last_ok = 0, None, now
        target.acked.update((a.id, FIRING) for a in open_alerts)
        target.acked.update((c.id, ACK_RESOLVED) for c in closing)

    async def _post(self, session: aiohttp.ClientSession, target: _Target,
                    body: list[dict[str, Any]]) -> str:
        """POST one body; the result label (ok, timeout, connect, http_4xx, http_5xx, error)."""
        try:
            async with asyncio.timeout(self.timeout), session.post(
                target.endpoint, json=body) as response:
                if 200 <= response.status < 300:
                    return "ok"
                text = (await response.content.read(MAX_ERROR_BODY)).decode("utf-8", "replace")
                log.error("%s refused the push with HTTP %d: %s", target.endpoint,
                          response.status, text.strip())
                if response.status >= 500:
                    return "http_5xx"
                return "http_4xx" if response.status >= 400 else "error"
        except TimeoutError:
            return "timeout"
        except aiohttp.ClientConnectionError as exc:
            log.debug("push to %s: %s", target.endpoint, exc)
            return "connect"
        except aiohttp.ClientError as exc:
            log.warning("push to %s: %s", target.endpoint, exc)
            return "error"
