"""The composition root: the one place that builds an evaluator process and owns its database.

``build_service`` is what ``gpu-health-evaluator run`` (and the demo) start. Order matters:
the store is opened and the active rule set registered *before* anything listens, so a rule
file whose version already has predictions with other parameters refuses start-up with a clear
message instead of serving half a process. Everything else is plain construction; the host
(:class:`gpu_health.evaluator.app.EvaluatorApp`) only runs what is handed to it.

The path of one reading: discovery -> scrape -> exposition -> write rule + dedup -> store ->
worker (backfill, then predict with the rules) -> stats, API, /metrics snapshot, alerts.

Loops (each with the host's one catch-all per tick): discovery (every 5 s, once at start-up),
ingest (every scrape interval; /healthz fails when it is stuck), worker (every rule scan
interval), prediction_state (the /metrics snapshot, every min(60 s, scan interval)), alerts
(every min(5 s, alerting.resend_interval)), remediation (the opt-in Slurm drain, every
``remediation.slurm.interval``), tokens_file (when ``api.tokens_file`` is set: re-read on
change) and cluster (with a shared PostgreSQL store: the leader lease, every third of
``ha.lease_ttl``).

With ``ingest.source: prometheus`` there is no discovery and no scraper: the ingest loop is the
Prometheus source's cycle (every step) feeding the same ingestor, and, on an empty store with
``history``, a background task imports and replays the past first (the worker waits for it).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from prometheus_client import PlatformCollector, ProcessCollector

from gpu_health.clock import Clock, system_clock
from gpu_health.errors import ConfigError, RuleError
from gpu_health.evaluator.alerts.alert_loop import AlertLoop
from gpu_health.evaluator.app import EvaluatorApp
from gpu_health.evaluator.backtest.bootstrap import HistoryBootstrap
from gpu_health.evaluator.cluster.membership import Cluster, ClusterConfig
from gpu_health.evaluator.compose.readings import readings as compose_readings
from gpu_health.evaluator.compose.remediation import Lead, remediation_loop
from gpu_health.evaluator.config.file import Config
from gpu_health.evaluator.config.rules import action_policy_file, load_action_policy, load_ruleset
from gpu_health.evaluator.http.api.auth import TokenSet, load_tokens
from gpu_health.evaluator.http.api.context import ApiContext
from gpu_health.evaluator.http.api.gate import ApiGate
from gpu_health.evaluator.http.api.token_file import CHECK_SECONDS as TOKENS_CHECK_SECONDS
from gpu_health.evaluator.http.api.token_file import TokenFile
from gpu_health.evaluator.http.site import add_routes
from gpu_health.evaluator.ingest.discovery import Discovery
from gpu_health.evaluator.ingest.prometheus.source import PrometheusSource
from gpu_health.evaluator.ingest.retention import Retention
from gpu_health.evaluator.ingest.scrape_tick import IngestPipeline
from gpu_health.evaluator.rules.actions import ActionPolicy, CardActions
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.stats.state_collector import DEFAULT_REFRESH_SECONDS, PredictionState
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.engines.postgres import PostgresDatabase
from gpu_health.evaluator.store.history.backtest import refuse_backtest_file
from gpu_health.evaluator.store.predictions.rule_versions import register_ruleset
from gpu_health.evaluator.worker import Worker, WorkerMetrics
from gpu_health.webguard import WebGuard

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
    token_file: TokenFile | None = None  # reloaded on SIGHUP and on change

    def hangup(self) -> None:
        """SIGHUP (on the event loop): reload what can be reloaded (the tokens file), in a
        worker thread, so a slow or hostile file never holds the API's requests."""
        if self.token_file is None:
            log.info("SIGHUP: nothing to reload (no tokens file)")
        else:
            asyncio.get_running_loop().run_in_executor(None, self.token_file.reload)

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


def load_shadow_rulesets(config: Config, active: RuleSet) -> tuple[RuleSet, ...]:
    """The rule files of ``rules.shadow``, as written (``GPU_HEALTH_RULE_*`` overrides steer
    the active version only); ConfigError lists every problem."""
    problems: list[str] = []
    found: list[RuleSet] = []
    for path in config.rules.shadow:
        try:
            ruleset = load_ruleset(path, env={})
        except ConfigError as exc:
            problems += [f"rules.shadow: {p}" for p in exc.problems]
            continue
        if ruleset.version == active.version:
            problems.append(f"rules.shadow: {path} is the active version {active.version}")
        elif any(r.version == ruleset.version for r in found):
            problems.append(f"rules.shadow: version {ruleset.version} is listed twice")
        else:
            found.append(ruleset)
    if problems:
        raise ConfigError(problems)
    return tuple(found)


def registrable_shadows(db: Database, shadows: tuple[RuleSet, ...],
                        now: datetime) -> tuple[RuleSet, ...]:
    """The shadow versions the store accepts. A shadow file edited after its version made
    predictions (other parameters, same name) is not run, said once, instead of stopping the
    whole evaluator: a shadow is a comparison, and the active version must keep running. The
    active version's own conflict still refuses the start (its history would change)."""
    kept = []
    for shadow in shadows:
        try:
            register_ruleset(db, shadow, now)
        except RuleError as exc:
            log.error("shadow version %s (%s) not run: %s", shadow.version, shadow.origin, exc)
            continue
        kept.append(shadow)
    return tuple(kept)


def build_service(config: Config, environ: Mapping[str, str], *, clock: Clock = system_clock,
                  start_loops: bool = True, worker_interval: float | None = None,
                  guard: WebGuard | None = None) -> Service:
    """Open the store, register the rule set, and assemble ingest + worker + API + alerts.

    ``worker_interval`` overrides the rule set's scan interval for the worker loop (the demo
    predicts every minute so that its live card is judged while someone watches)."""
    ruleset = load_active_ruleset(config, environ)
    shadows = load_shadow_rulesets(config, ruleset)
    policy = _action_policy(config)
    tokens = None if config.api.tokens_file is None else load_tokens(config.api.tokens_file)
    member = config.ha.member_id or f"{socket.gethostname()}:{config.web.listen_port}-" \
                                    f"{secrets.token_hex(3)}"
    db = open_store(config, member)
    if guard is not None and guard.basic_auth and tokens is not None:
        raise ConfigError("--web.config.file basic_auth_users and api.tokens_file both "
                          "authenticate with the Authorization header: configure one of them")
    app = EvaluatorApp(start_loops=start_loops, tokens=tokens, listen_host=config.web.listen_host,
                       guard=guard, api=config.api)
    # process_* and python_info, as every Prometheus exporter has (no node data: public).
    ProcessCollector(registry=app.registry)
    PlatformCollector(registry=app.registry)
    try:
        if not db.shared:
            refuse_backtest_file(db, config.storage.path)
        shadows = registrable_shadows(db, shadows, clock())
        worker = Worker(db, ruleset, clock, metrics=WorkerMetrics(app.registry),
                        shadows=shadows)
        worker.register()  # RuleError: refuse to start, before anything listens
    except BaseException:
        db.close()
        raise
    app.metrics.watch_statements(lambda: db.statements)
    app.add_ready_check("store", lambda: None if app.started else "database not open yet")
    cluster = _cluster(config, app, db, member)
    lead = _leader_only(cluster)
    gate = ApiGate(config.api, app.registry)
    app.priority = gate.priority  # ingest and worker ticks go before API requests
    readings = compose_readings(config, app, db, clock, (ruleset, *shadows), cluster)
    scan = ruleset.params.scan_interval.total_seconds()
    bootstrap = readings.bootstrap

    async def work() -> None:
        if bootstrap is None or not bootstrap.running:  # the history's replay comes first
            await db.run(worker.tick)

    app.add_loop("worker", worker_interval or scan, lambda: lead(work), priority=True)
    add_routes(app.web_app, app, ApiContext(
        db=lambda: db if app.started else None, clock=clock,
        current_rule_version=ruleset.version, tokens=tokens, listen_host=config.web.listen_host,
        registry=app.registry, retention_days=config.retention_days, ruleset=ruleset,
        action_policy=policy, shadows=shadows,
        basic_auth=guard is not None and guard.basic_auth,
        gate=gate), readings.nodes)
    state = PredictionState(db, clock, ruleset=ruleset, retention_days=config.retention_days,
                            registry=app.node_registry, policy=policy, shadows=shadows)
    app.add_loop("prediction_state", min(DEFAULT_REFRESH_SECONDS, scan), state.refresh)
    if bootstrap is not None:  # a replayed history changes every figure: no stale one stays
        bootstrap.on_done = partial(state.refresh, now=True)
    alerts = _alert_loop(config, app, db, clock, readings.present,
                         None if policy is None else state.card_actions, lead)
    remediation_loop(config, app, db, clock, actions=None if policy is None else
                     state.card_actions, lead=lead, member=member, environ=environ,
                     discovery=readings.discovery)
    app.on_stop(lambda: asyncio.to_thread(db.close))  # registered first: runs last
    if cluster is not None:
        app.on_stop(cluster.close)  # hand the lease over at once
    if alerts is not None:
        app.on_stop(alerts.close)
    log.info("rule set %s (%s) active; predictions every %s", ruleset.version, ruleset.origin,
             timedelta(seconds=worker_interval or scan))
    for shadow in shadows:
        log.info("rule set %s (%s) runs as a shadow: stored and backfilled, never alerted, "
                 "not in the default statistics", shadow.version, shadow.origin)
    token_file = None
    if tokens is not None and config.api.tokens_file is not None:
        token_file = TokenFile(config.api.tokens_file, tokens, app.registry)
        app.add_loop("tokens_file", TOKENS_CHECK_SECONDS, token_file.check)
    return Service(app, db, ruleset, worker, tokens, readings.pipeline, readings.discovery,
                   readings.retention, state, alerts, readings.source, bootstrap, token_file)


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


def _alert_loop(config: Config, app: EvaluatorApp, db: Database, clock: Clock,
                present_nodes: Callable[[], Collection[str] | None],
                actions: CardActions | None, lead: Lead) -> AlertLoop | None:
    if not config.alerting.enabled:
        log.warning("alerting.enabled is false: no GPU_FAULT_PREDICTED alert is opened or "
                    "pushed (remove the key or set it to true to alert)")
        return None
    if urlsplit(config.web.url).hostname in ("0.0.0.0", "::", ""):
        log.warning("alert links will point at %s, which nobody can open: set web.external_url "
                    "to the address operators use", config.web.url)

    loop = AlertLoop(db, config.alerting, external_url=config.web.url, clock=clock,
                     registry=app.registry, present_nodes=present_nodes,
                     node_registry=app.node_registry, actions=actions)
    app.add_loop("alerts", loop.interval, lambda: lead(loop.tick))
    return loop


def open_store(config: Config, member: str) -> Database:
    """The DuckDB file, or the PostgreSQL database of ``storage.url`` (unreachable: a
    StoreError naming the host, and the process exits 1)."""
    pg = config.storage.postgres
    if pg is None:
        return DuckDBDatabase(config.storage.path, memory_limit=config.storage.memory_limit)
    return PostgresDatabase(pg.url, password=pg.password, connect_timeout=pg.connect_timeout,
                            statement_timeout_s=pg.statement_timeout,
                            application_name=f"gpu-health-evaluator/{member}",
                            lease_ttl_s=config.ha.lease_ttl)


def _cluster(config: Config, app: EvaluatorApp, db: Database, member: str) -> Cluster | None:
    """With a shared store: the membership loop, /readyz's leader, the lease metrics."""
    if not db.shared:
        return None
    cluster = Cluster(db, ClusterConfig(member, config.web.url,
                                        timedelta(seconds=config.ha.lease_ttl)), app.registry)
    app.on_start(cluster.claim)  # a twin member id stops the start here
    app.add_loop("cluster", cluster.interval, cluster.tick)
    app.add_ready_check("cluster", cluster.not_ready)
    app.add_fact("leader", cluster.leader_text)
    app.add_fact("member", lambda: member)
    return cluster


def _leader_only(cluster: Cluster | None) -> Lead:
    """Run a leader-only tick (worker, alerts, retention): always on a lone DuckDB evaluator,
    under the fence on the leader of several, not at all on a follower."""
    if cluster is None:
        async def direct(fn: Callable[[], Awaitable[Any]]) -> Any:
            return await fn()
        return direct
    return cluster.leading
