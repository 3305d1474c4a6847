"""The readings half of the composition root: where readings come from (discovery and scrape,
or a Prometheus source), the ingestor they go through, retention behind it, and, with several
evaluators on one PostgreSQL store, this evaluator's share of the scrape targets.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import timedelta

from gpu_health.clock import Clock
from gpu_health.evaluator.app import EvaluatorApp
from gpu_health.evaluator.backtest.bootstrap import HistoryBootstrap
from gpu_health.evaluator.cluster.assign import TargetShare, owner
from gpu_health.evaluator.cluster.membership import Cluster
from gpu_health.evaluator.config.file import Config
from gpu_health.evaluator.http.api.auth import Principal
from gpu_health.evaluator.http.ops import NodeViews, source_views
from gpu_health.evaluator.ingest.cycle import CycleReport, Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.discovery import TICK_SECONDS, Discovery
from gpu_health.evaluator.ingest.prometheus.source import PrometheusSource
from gpu_health.evaluator.ingest.prometheus.source_metrics import SourceMetrics
from gpu_health.evaluator.ingest.retention import Retention
from gpu_health.evaluator.ingest.scrape import Scraper
from gpu_health.evaluator.ingest.scrape_tick import IngestPipeline
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.selfmetrics import SelfMetrics
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.statistics.api_queries import visible_nodes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Readings:
    """Where readings come from (scrape or a Prometheus source) and what stands behind."""

    retention: Retention
    present: Callable[[], Collection[str] | None]  # nodes still there (alerts close the rest)
    nodes: NodeViews  # what /targets and the authenticated metrics path show
    pipeline: IngestPipeline | None = None
    discovery: Discovery | None = None
    source: PrometheusSource | None = None
    bootstrap: HistoryBootstrap | None = None


def readings(config: Config, app: EvaluatorApp, db: Database, clock: Clock,
             rulesets: tuple[RuleSet, ...], cluster: Cluster | None) -> Readings:
    """Where readings come from. ``rulesets``: the active version, then the shadows (the
    first-start history replays them all)."""
    retention = Retention(db, days=config.retention_days, clock=clock, metrics=app.metrics,
                          leading=None if cluster is None else cluster.leading)
    app.on_stop(retention.close)
    ingestor = _ingestor(config, app, db, retention)
    if config.ingest.prometheus is not None:
        source, bootstrap = _prometheus(config, app, db, clock, ingestor, rulesets, cluster)
        views = source_views(source, lambda principal: db.run(
            visible_nodes, db, principal.tenant_list or []))
        return Readings(retention, source.present_nodes, views, source=source,
                        bootstrap=bootstrap)
    pipeline, discovery = _ingest(config, app, db, clock, ingestor, cluster)
    return Readings(retention, _present(discovery),
                    _node_views(db, discovery, pipeline, cluster), pipeline, discovery)


def _ingestor(config: Config, app: EvaluatorApp, db: Database,
              retention: Retention) -> Ingestor:
    """Write rule + dedup -> store, whichever source the readings come from."""
    cache = DedupCache(config.dedup.max_entries, timedelta(seconds=config.dedup.idle_seconds))
    return Ingestor(db, cache, keepalive=config.keepalive,
                    source=config.ingest_source, metrics=app.metrics,
                    on_written=retention.note_written)


def _prometheus(config: Config, app: EvaluatorApp, db: Database, clock: Clock,
                ingestor: Ingestor, rulesets: tuple[RuleSet, ...], cluster: Cluster | None
                ) -> tuple[PrometheusSource, HistoryBootstrap]:
    """Prometheus source -> the same ingestor; the first-start history before it. Several
    evaluators: only the leader reads (:func:`_leader_reads`)."""
    c = config.ingest.prometheus
    assert c is not None
    step = c.step or config.scrape.interval
    source = PrometheusSource(c, step=timedelta(seconds=step), db=db, ingestor=ingestor,
                              clock=clock, metrics=SourceMetrics(app.registry),
                              forget_after=timedelta(seconds=config.dedup.idle_seconds))
    bootstrap = HistoryBootstrap(db, c, source, ruleset=rulesets[0], shadows=rulesets[1:],
                                 clock=clock,
                                 keepalive=config.keepalive)
    app.on_start(source.open)
    app.on_start(bootstrap.prepare)
    app.on_stop(source.close)
    app.add_background("history", bootstrap.run)
    app.add_ready_check("source", source.not_ready)
    cycle = source.run_cycle if cluster is None else _leader_reads(source, cluster)
    app.add_loop("ingest", step, cycle, priority=True,
                 stuck_after=max(3 * step + c.timeout * 4, 300.0))

    async def ready() -> None:
        log.info("evaluator ready: storage %s, reading %s metrics from %s every %gs, listening "
                 "on %s", storage_text(db), c.metrics, c.url, step, config.web.listen_address)

    app.on_start(ready, after_ticks=True)
    return source, bootstrap


def _leader_reads(source: PrometheusSource,
                  cluster: Cluster) -> Callable[[], Awaitable[CycleReport | None]]:
    """Several evaluators on one store read one Prometheus: only the leader reads, and every
    transaction of its cycle checks its lease (a deposed leader's late write is refused). A
    change of leadership resets the source, so a new leader goes on after the newest step the
    old one wrote: no step written twice, none left out (within ``max_catchup``)."""
    held: list[int | None] = [None]

    async def cycle() -> CycleReport | None:
        token = cluster.token
        if token != held[0]:
            source.standby(following=token is None)
            held[0] = token
        if token is None:
            return None
        return await cluster.leading(source.run_cycle)

    return cycle


def _present(discovery: Discovery) -> Callable[[], Collection[str] | None]:
    def present_nodes() -> Collection[str] | None:
        if not discovery.ready:
            return None
        return {t.node_id for t in discovery.targets}

    return present_nodes


def _ingest(config: Config, app: EvaluatorApp, db: Database, clock: Clock,
            ingestor: Ingestor, cluster: Cluster | None) -> tuple[IngestPipeline, Discovery]:
    """Discovery -> scrape (this evaluator's share of the targets) -> the ingestor."""
    metrics: SelfMetrics = app.metrics
    discovery = Discovery(config, metrics=metrics)
    scrape = config.scrape
    scraper = Scraper(timeout=scrape.timeout, max_concurrency=scrape.max_concurrency,
                      max_response_bytes=scrape.max_response_bytes, clock=clock,
                      sample_limit=scrape.sample_limit, max_cards=scrape.max_cards_per_target)
    share = None if cluster is None else TargetShare(cluster.members, cluster.me,
                                                      ingestor.forget_nodes)
    pipeline = IngestPipeline(targets=lambda: discovery.targets if share is None else
                              share(discovery.targets), scraper=scraper,
                              ingestor=ingestor, clock=clock, metrics=metrics,
                              names=discovery.names)

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
    app.add_ready_check("ingest", pipeline.not_ready)
    app.add_loop("discovery", TICK_SECONDS, discover, at_start=True)
    app.add_loop("ingest", scrape.interval, pipeline.run_cycle, priority=True,
                 stuck_after=max(3 * scrape.interval + scrape.timeout, 300.0))
    app.on_start(lambda: _log_ready(config, db, discovery), after_ticks=True)
    return pipeline, discovery



def _node_views(db: Database, discovery: Discovery, pipeline: IngestPipeline,
                cluster: Cluster | None) -> NodeViews:
    """Which nodes a caller may see: those the store files under one of its tenants (as the
    API decides) and the discovered targets labelled with one of them."""

    async def visible(principal: Principal) -> frozenset[str]:
        tenants = principal.tenant_list or []
        stored = await db.run(visible_nodes, db, tenants)
        return stored | {t.node_id for t in discovery.targets if t.tenant in tenants}

    scraper_of = None if cluster is None else (
        lambda url: owner(url, {*cluster.members(), cluster.me}), cluster.me)
    return NodeViews(
        targets=lambda: (discovery.targets, pipeline.last_results, discovery.conflicts,
                         discovery.last_errors),
        visible=visible, target_nodes=lambda: {t.url: t.node_id for t in discovery.targets},
        scraper_of=scraper_of)


def storage_text(db: Database) -> str:
    """The store as the ready line names it: the DuckDB file, or PostgreSQL's host:port/db
    (never the default DuckDB path of a config that uses PostgreSQL, nor a password)."""
    return f"{db.engine} {db.path}"


async def _log_ready(config: Config, db: Database, discovery: Discovery) -> None:
    log.info("evaluator ready: storage %s, %d target(s), listening on %s",
             storage_text(db), len(discovery.targets), config.web.listen_address)


