"""Wires one evaluator process: store, rule set + prediction worker, read API, ingest app.

``build_service`` is what ``gpu-health-evaluator run`` (and the demo) start. Order matters:
the store is opened and the active rule set registered *before* anything listens, so a rule
file whose version already has predictions with other parameters refuses start-up with a clear
message instead of serving half a process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import web

from evaluator.api import ApiContext, add_api_routes
from evaluator.api.auth import TokenSet, is_loopback, load_tokens
from evaluator.app import EvaluatorApp
from evaluator.rules.ruleset import RuleSet, load_ruleset
from evaluator.settings import Config
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

    async def close_db(_app: web.Application) -> None:
        await asyncio.to_thread(db.close)

    app.web_app.on_cleanup.append(close_db)
    log.info("rule set %s (%s) active; predictions every %s", ruleset.version, ruleset.origin,
             ruleset.params.scan_interval)
    return Service(app, db, ruleset, worker, tokens)
