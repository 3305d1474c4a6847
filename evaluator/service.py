"""Wires one evaluator process: store, rule set + prediction worker, read API, ingest app,
prediction-state metrics and the GPU_FAULT_PREDICTED alert loop.

``build_service`` is what ``gpu-health-evaluator run`` (and the demo) start. Order matters:
the store is opened and the active rule set registered *before* anything listens, so a rule
file whose version already has predictions with other parameters refuses start-up with a clear
message instead of serving half a process.

Loops (each its own task with the app's one catch-all per tick): ingest, discovery, worker
(every rule scan interval), prediction_state (the /metrics snapshot for dashboards, every
min(60 s, scan interval)) and alerts (every min(5 s, alerting.resend_interval)).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from evaluator.alerts.loop import AlertLoop
from evaluator.api import ApiContext, add_api_routes
from evaluator.api.auth import TokenSet, is_loopback, load_tokens
from evaluator.app import EvaluatorApp
from evaluator.prediction_metrics import DEFAULT_REFRESH_SECONDS, PredictionState
from evaluator.rules.ruleset import RuleSet, load_ruleset
from evaluator.settings import Config
from evaluator.store.backtest import MARKER, is_backtest_file
from evaluator.store.db import Database
from evaluator.worker import Worker, WorkerMetrics
from gpu_health.clock import Clock, system_clock
from gpu_health.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Service:
    """The parts of a running evaluator that callers (CLI, demo, tests) may reach."""

    app: EvaluatorApp
    db: Database
    ruleset: RuleSet
    worker: Worker
    tokens: TokenSet | None
    prediction_state: PredictionState
    alerts: AlertLoop | None  # None when alerting.enabled is false

    @property
    def web_app(self) -> web.Application:
        return self.app.web_app


def load_active_ruleset(config: Config, environ: Mapping[str, str]) -> RuleSet:
    """The rule set named by ``rules.active`` in ``rules.dir`` (env overrides applied)."""
    path = config.rules.dir / f"{config.rules.active}.yaml"
    if not path.is_file():
        raise ConfigError(f"rules: no rule file {path} (rules.dir={config.rules.dir}, "
                          f"rules.active={config.rules.active})")
    return load_ruleset(path, environ)


def build_service(config: Config, environ: Mapping[str, str], *, clock: Clock = system_clock,
                  start_loops: bool = True) -> Service:
    """Open the store, register the rule set, and assemble ingest + worker + API."""
    ruleset = load_active_ruleset(config, environ)
    tokens = None if config.api_tokens_file is None else load_tokens(config.api_tokens_file)
    if tokens is None and not is_loopback(config.listen_host):
        log.warning("no api.tokens_file and listening on %s: the read API refuses every request "
                    "until a tokens file is configured", config.listen_host)
    db = Database(config.storage_path)
    try:
        _refuse_backtest_file(db, config)
        app = EvaluatorApp(config, clock=clock, db=db, start_loops=start_loops)
        worker = Worker(db, ruleset, clock,
                        metrics=WorkerMetrics(app.registry, loop_errors=app.metrics.loop_errors))
        worker.register()  # RuleError: refuse to start, before anything listens
    except BaseException:
        db.close()
        raise
    app.add_loop("worker", ruleset.params.scan_interval.total_seconds(),
                 lambda: db.run(worker.tick))
    add_api_routes(app.web_app, ApiContext(
        db=lambda: app.db, clock=clock, current_rule_version=ruleset.version, tokens=tokens,
        listen_host=config.listen_host, registry=app.registry,
        retention_days=config.retention_days, ruleset=ruleset))

    scan = ruleset.params.scan_interval.total_seconds()
    state = PredictionState(db, clock, ruleset=ruleset, retention_days=config.retention_days,
                            registry=app.registry)
    app.add_loop("prediction_state", min(DEFAULT_REFRESH_SECONDS, scan), state.refresh)
    alerts = _alert_loop(config, app, db, clock)

    async def close_db(_app: web.Application) -> None:
        if alerts is not None:
            await alerts.close()
        await asyncio.to_thread(db.close)

    app.web_app.on_cleanup.append(close_db)
    log.info("rule set %s (%s) active; predictions every %s", ruleset.version, ruleset.origin,
             ruleset.params.scan_interval)
    return Service(app, db, ruleset, worker, tokens, state, alerts)


def _refuse_backtest_file(db: Database, config: Config) -> None:
    """A backtest file holds imported history as ``source='real'`` samples and the predictions
    of every replayed version: served live, it would feed replayed data into the statistics,
    the dashboards and the alerts."""
    if is_backtest_file(db):
        raise ConfigError(
            f"storage.path {config.storage_path} is a backtest file (it holds the table "
            f"{MARKER}, written by `gpu-health-evaluator backtest`), not a live store: its "
            "samples are replayed history. Point storage.path at the live database")


def _alert_loop(config: Config, app: EvaluatorApp, db: Database,
                clock: Clock) -> AlertLoop | None:
    if not config.alerting.enabled:
        log.warning("alerting.enabled is false: no GPU_FAULT_PREDICTED alert is opened or "
                    "pushed (remove the key or set it to true to alert)")
        return None
    if urlsplit(config.external_url).hostname in ("0.0.0.0", "::", ""):
        log.warning("alert links will point at %s, which nobody can open: set web.external_url "
                    "to the address operators use", config.external_url)

    def present_nodes() -> Collection[str] | None:
        if not app.discovery.ready:
            return None
        return {t.node_id for t in app.discovery.targets}

    loop = AlertLoop(db, config.alerting, external_url=config.external_url, clock=clock,
                     registry=app.registry, present_nodes=present_nodes)
    app.add_loop("alerts", loop.interval, loop.tick)
    return loop
