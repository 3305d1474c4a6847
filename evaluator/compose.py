"""The composition root: the one place that builds an evaluator process and owns its database.

``build_service`` is what ``gpu-health-evaluator run`` (and the demo) start. Order matters:
the store is opened and the active rule set registered *before* anything listens, so a rule
file whose version already has predictions with other parameters refuses start-up with a clear
message instead of serving half a process. Everything else is plain construction; the host
(:class:`evaluator.app.EvaluatorApp`) only runs what is handed to it.

The path of one reading: discovery -> scrape -> exposition -> write rule + dedup -> store ->
worker (backfill, then predict with the rules) -> stats, API, /metrics snapshot, alerts.

Loops (each with the host's one catch-all per tick): discovery (every 5 s, once at start-up),
ingest (every scrape interval; /healthz fails when it is stuck), worker (every rule scan
interval), prediction_state (the /metrics snapshot, every min(60 s, scan interval)) and alerts
(every min(5 s, alerting.resend_interval)).

With ``ingest.source: prometheus`` there is no discovery and no scraper: the ingest loop is the
Prometheus source's cycle (every step) feeding the same ingestor, and, on an empty store with
``history``, a background task imports and replays the past first (the worker waits for it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from aiohttp import web

from evaluator.alerts.loop import AlertLoop, CardActions
from evaluator.app import EvaluatorApp
from evaluator.backtest.bootstrap import HistoryBootstrap
from evaluator.config.file import Config
from evaluator.config.rules import action_policy_file, load_action_policy, load_ruleset
from evaluator.http.api.auth import Principal, TokenSet, load_tokens
from evaluator.http.api.context import ApiContext
from evaluator.http.api.routes import add_api_routes
from evaluator.http.ops import NodeViews, add_node_routes, source_views
from evaluator.ingest.cycle import Ingestor
from evaluator.ingest.dedup import DedupCache
from evaluator.ingest.discovery import TICK_SECONDS, Discovery
from evaluator.ingest.pipeline import IngestPipeline
from evaluator.ingest.prometheus.metrics import SourceMetrics
from evaluator.ingest.prometheus.source import PrometheusSource
from evaluator.ingest.retention import Retention
from evaluator.ingest.scrape import Scraper
from evaluator.rules.actions import ActionPolicy
from evaluator.rules.ruleset import RuleSet
from evaluator.selfmetrics import SelfMetrics
from evaluator.stats.snapshot import DEFAULT_REFRESH_SECONDS, PredictionState
from evaluator.store.api_queries import visible_nodes
from evaluator.store.backtest import refuse_backtest_file
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
    pipeline: IngestPipeline | None  # None with a Prometheus source
    discovery: Discovery | None
    retention: Retention
    prediction_state: PredictionState
    alerts: AlertLoop | None  # None when alerting.enabled is false
    source: PrometheusSource | None = None  # ingest.source: prometheus
    bootstrap: HistoryBootstrap | None = None

    @property
    def web_app(self) -> web.Application:
        return self.app.web_app


def load_active_ruleset(config: Config, environ: Mapping[str, str]) -> RuleSet:
    """The rule set named by ``rules.active`` in ``rules.dir`` (env overrides applied)."""
    path = config.rules.dir / f"{config.rules.active}.yaml"
    if not path.is_file():
        raise ConfigError(f"rules: no rule file {path} (rules.dir={config.rules.dir}, "
                          f"rules.active={config.rules.active})")
    return load_ruleset(path, env=environ)


def build_service(config: Config, environ: Mapping[str, str], *, clock: Clock = system_clock,
                  start_loops: bool = True, worker_interval: float | None = None) -> Service:
    """Open the store, register the rule set, and assemble ingest + worker + API + alerts.

    ``worker_interval`` overrides the rule set's scan interval for the worker loop (the demo
    predicts every minute so that its live card is judged while someone watches)."""
    ruleset = load_active_ruleset(config, environ)
    policy = _action_policy(config)
    tokens = None if config.api_tokens_file is None else load_tokens(config.api_tokens_file)
    db = Database(config.storage_path)
    app = EvaluatorApp(start_loops=start_loops, tokens=tokens, listen_host=config.listen_host)
    try:
        refuse_backtest_file(db, config.storage_path)
        worker = Worker(db, ruleset, clock, metrics=WorkerMetrics(app.registry))
        worker.register()  # RuleError: refuse to start, before anything listens
    except BaseException:
        db.close()
        raise
    app.metrics.watch_statements(lambda: db.statements)
    app.add_ready_check("store", lambda: None if app.started else "database not open yet")
    readings = _readings(config, app, db, clock, ruleset)
    scan = ruleset.params.scan_interval.total_seconds()
    bootstrap = readings.bootstrap

    async def work() -> None:
        if bootstrap is None or not bootstrap.running:  # the history's replay comes first
            await db.run(worker.tick)

    app.add_loop("worker", worker_interval or scan, work)
    add_api_routes(app.web_app, ApiContext(
        db=lambda: db if app.started else None, clock=clock,
        current_rule_version=ruleset.version, tokens=tokens, listen_host=config.listen_host,
        registry=app.registry, retention_days=config.retention_days, ruleset=ruleset,
        action_policy=policy))
    state = PredictionState(db, clock, ruleset=ruleset, retention_days=config.retention_days,
                            registry=app.node_registry, policy=policy)
    app.add_loop("prediction_state", min(DEFAULT_REFRESH_SECONDS, scan), state.refresh)
    alerts = _alert_loop(config, app, db, clock, readings.present,
                         None if policy is None else state.card_actions)
    app.on_stop(lambda: asyncio.to_thread(db.close))  # registered first: runs last
    if alerts is not None:
        app.on_stop(alerts.close)
    log.info("rule set %s (%s) active; predictions every %s", ruleset.version, ruleset.origin,
             timedelta(seconds=worker_interval or scan))
    return Service(app, db, ruleset, worker, tokens, readings.pipeline, readings.discovery,
                   readings.retention, state, alerts, readings.source, bootstrap)


@dataclass(frozen=True)
class _Readings:
    """Where readings come from (scrape or a Prometheus source) and what stands behind."""

    retention: Retention
    present: Callable[[], Collection[str] | None]  # nodes still there (alerts close the rest)
    pipeline: IngestPipeline | None = None
    discovery: Discovery | None = None
    source: PrometheusSource | None = None
    bootstrap: HistoryBootstrap | None = None


def _readings(config: Config, app: EvaluatorApp, db: Database, clock: Clock,
              ruleset: RuleSet) -> _Readings:
    retention = Retention(db, days=config.retention_days, clock=clock, metrics=app.metrics)
    app.on_stop(retention.close)
    ingestor = _ingestor(config, app, db, retention)
    if config.ingest.prometheus is not None:
        source, bootstrap = _prometheus(config, app, db, clock, ingestor, ruleset)
        return _Readings(retention, source.present_nodes, source=source, bootstrap=bootstrap)
    pipeline, discovery = _ingest(config, app, db, clock, ingestor)
    return _Readings(retention, _present(discovery), pipeline, discovery)


def _ingestor(config: Config, app: EvaluatorApp, db: Database,
              retention: Retention) -> Ingestor:
    """Write rule + dedup -> store, whichever source the readings come from."""
    cache = DedupCache(config.dedup.max_entries, timedelta(seconds=config.dedup.idle_seconds))
    return Ingestor(db, cache, keepalive=timedelta(seconds=config.keepalive_seconds),
                    source=config.ingest_source, metrics=app.metrics,
                    on_written=retention.note_written)


def _prometheus(config: Config, app: EvaluatorApp, db: Database, clock: Clock,
                ingestor: Ingestor, ruleset: RuleSet
                ) -> tuple[PrometheusSource, HistoryBootstrap]:
    """Prometheus source -> the same ingestor; the first-start history before it."""
    c = config.ingest.prometheus
    assert c is not None
    step = c.step or config.scrape.interval
    source = PrometheusSource(c, step=timedelta(seconds=step), db=db, ingestor=ingestor,
                              clock=clock, metrics=SourceMetrics(app.registry),
                              forget_after=timedelta(seconds=config.dedup.idle_seconds))
    bootstrap = HistoryBootstrap(db, c, source, ruleset=ruleset, clock=clock,
                                 keepalive=timedelta(seconds=config.keepalive_seconds))
    app.on_start(source.open)
    app.on_start(bootstrap.prepare)
    app.on_stop(source.close)
    app.add_background("history", bootstrap.run)
    app.add_ready_check("source", source.not_ready)
    app.add_loop("ingest", step, source.run_cycle,
                 stuck_after=max(3 * step + c.timeout * 4, 300.0))
    add_node_routes(app.web_app, app, source_views(
        source, lambda principal: db.run(visible_nodes, db, principal.tenant_list or [])))

    async def ready() -> None:
        log.info("evaluator ready: storage %s, reading %s metrics from %s every %gs, listening "
                 "on %s", config.storage_path, c.metrics, c.url, step, config.listen_address)

    app.on_start(ready, after_ticks=True)
    return source, bootstrap


def _present(discovery: Discovery) -> Callable[[], Collection[str] | None]:
    def present_nodes() -> Collection[str] | None:
        if not discovery.ready:
            return None
        return {t.node_id for t in discovery.targets}

    return present_nodes


def _ingest(config: Config, app: EvaluatorApp, db: Database, clock: Clock,
            ingestor: Ingestor) -> tuple[IngestPipeline, Discovery]:
    """Discovery -> scrape -> the ingestor."""
    metrics: SelfMetrics = app.metrics
    discovery = Discovery(config, metrics=metrics)
    scrape = config.scrape
    scraper = Scraper(timeout=scrape.timeout, max_concurrency=scrape.max_concurrency,
                      max_response_bytes=scrape.max_response_bytes, clock=clock,
                      sample_limit=scrape.sample_limit, max_cards=scrape.max_cards_per_target)
    pipeline = IngestPipeline(targets=lambda: discovery.targets, scraper=scraper,
                              ingestor=ingestor, clock=clock, metrics=metrics)

    async def open_clients() -> None:
        await scraper.__aenter__()
        await discovery.start()

    async def close_clients() -> None:
        await scraper.close()
        await discovery.close()

    async def discover() -> None:
        await discovery.refresh(clock())

    app.on_start(open_clients)
    app.on_stop(close_clients)
    app.add_ready_check("discovery", lambda: None if discovery.ready else (
        "target discovery has not produced a target list from every source yet"))
    app.add_loop("discovery", TICK_SECONDS, discover, at_start=True)
    app.add_loop("ingest", scrape.interval, pipeline.run_cycle,
                 stuck_after=max(3 * scrape.interval + scrape.timeout, 300.0))
    add_node_routes(app.web_app, app, _node_views(db, discovery, pipeline))
    app.on_start(lambda: _log_ready(config, discovery), after_ticks=True)
    return pipeline, discovery


def _action_policy(config: Config) -> ActionPolicy | None:
    """The shipped recommended-action policy (docs/actions.md) under rules.dir, else the one
    beside the package; a broken file fails start-up, a missing one leaves every action
    ``unknown`` (said once, loudly)."""
    for path in (action_policy_file(config.rules.dir), action_policy_file()):
        if path.is_file():
            return load_action_policy(path)
    log.warning("no recommended-action policy found (%s): every card's action is unknown",
                action_policy_file(config.rules.dir))
    return None


def _node_views(db: Database, discovery: Discovery, pipeline: IngestPipeline) -> NodeViews:
    """Which nodes a caller may see: those the store files under one of its tenants (as the
    API decides) and the discovered targets labelled with one of them."""

    async def visible(principal: Principal) -> frozenset[str]:
        tenants = principal.tenant_list or []
        stored = await db.run(visible_nodes, db, tenants)
        return stored | {t.node_id for t in discovery.targets if t.tenant in tenants}

    return NodeViews(
        targets=lambda: (discovery.targets, pipeline.last_results, discovery.conflicts,
                         discovery.last_errors),
        visible=visible, target_nodes=lambda: {t.url: t.node_id for t in discovery.targets})


async def _log_ready(config: Config, discovery: Discovery) -> None:
    log.info("evaluator ready: storage %s, %d target(s), listening on %s",
             config.storage_path, len(discovery.targets), config.listen_address)


def _alert_loop(config: Config, app: EvaluatorApp, db: Database, clock: Clock,
                present_nodes: Callable[[], Collection[str] | None],
                actions: CardActions | None) -> AlertLoop | None:
    if not config.alerting.enabled:
        log.warning("alerting.enabled is false: no GPU_FAULT_PREDICTED alert is opened or "
                    "pushed (remove the key or set it to true to alert)")
        return None
    if urlsplit(config.external_url).hostname in ("0.0.0.0", "::", ""):
        log.warning("alert links will point at %s, which nobody can open: set web.external_url "
                    "to the address operators use", config.external_url)

    loop = AlertLoop(db, config.alerting, external_url=config.external_url, clock=clock,
                     registry=app.registry, present_nodes=present_nodes,
                     node_registry=app.node_registry, actions=actions)
    app.add_loop("alerts", loop.interval, loop.tick)
    return loop
