"""The worker as the process runs it: one loop of the host (``gpu_health.evaluator.app``) whose
single catch-all counts failures, start-up refusal of a changed rule file, self-metrics.

No test waits for time: ``EvaluatorApp.run_tick`` runs one tick of the worker loop.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gpu_health.clock import Clock
from gpu_health.errors import RuleError
from gpu_health.evaluator.app import EvaluatorApp
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.predictions.rule_versions import register_ruleset
from gpu_health.evaluator.worker import Worker, WorkerMetrics
from tests.evaluator.rules_support import (
    at,
    const,
    insert_prediction,
    load,
    open_db,
    quadratic,
    ruleset,
    series,
)

NOW = at(12) + timedelta(minutes=10)


def hosted(db: Database, rules: RuleSet, clock: Clock) -> tuple[EvaluatorApp, Worker]:
    """The worker registered as the process host's "worker" loop, as compose does it."""
    app = EvaluatorApp(start_loops=False)
    worker = Worker(db, rules, clock, metrics=WorkerMetrics(app.registry))
    app.add_loop("worker", 1800, lambda: db.run(worker.tick))
    return app, worker


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def degrading_db(tmp_path: Path) -> Database:
    db = open_db(tmp_path)
    load(db, series("n1", 0, "GPU-a", start=-8, end=30, corrected=quadratic(2, onset=0),
                    uncorrected=const(0)))
    return db


async def test_run_ticks_and_reports_metrics(tmp_path: Path) -> None:
    db = degrading_db(tmp_path)
    app, worker = hosted(db, ruleset(), lambda: NOW)
    worker.register()
    await app.run_tick("worker")
    registry = app.registry
    assert value(registry, "gpu_health_evaluator_worker_ticks_total") == 1
    assert value(registry, "gpu_health_evaluator_worker_last_success_timestamp_seconds") == \
        NOW.timestamp()
    assert value(registry, "gpu_health_evaluator_predictions_created_total",
                 source="real", layer="trend") == 1
    assert value(registry, "gpu_health_evaluator_worker_cards_evaluated", source="real") == 1
    assert db.fetchone("SELECT count(*) FROM gpu_health_rule_versions")[0] == 1
    db.close()


async def test_a_failing_tick_is_counted_and_the_loop_survives(tmp_path: Path) -> None:
    db = degrading_db(tmp_path)
    app, worker = hosted(db, ruleset(), lambda: NOW)
    worker.register(NOW)
    for statement in ("DROP INDEX idx_predictions_card", "DROP INDEX idx_predictions_status",
                      "DROP TABLE gpu_health_predictions"):  # a DB error mid-flight
        db.execute(statement)
    await app.run_tick("worker")
    assert value(app.registry, "gpu_health_evaluator_loop_errors_total",
                 loop="worker", reason="query") == 1
    await app.run_tick("worker")
    assert value(app.registry, "gpu_health_evaluator_loop_errors_total",
                 loop="worker", reason="query") == 2
    assert value(app.registry, "gpu_health_evaluator_worker_ticks_total") == 0
    db.close()


async def test_unexpected_errors_are_counted_too(tmp_path: Path) -> None:
    db = degrading_db(tmp_path)

    def broken_clock() -> datetime:
        raise ValueError("clock exploded")

    app, _ = hosted(db, ruleset(), broken_clock)
    await app.run_tick("worker")
    assert value(app.registry, "gpu_health_evaluator_loop_errors_total",
                 loop="worker", reason="internal") == 1
    db.close()


def test_changed_rule_file_is_refused_before_any_tick(tmp_path: Path) -> None:
    db = degrading_db(tmp_path)
    register_ruleset(db, ruleset(), NOW)
    insert_prediction(db, pid="old", node="n1", gpu=0, uuid="GPU-a", t0=at(1))
    # Same version name, other parameters: simulate an in-place edit of the YAML file.
    edited = ruleset(min_increase=16)
    tampered = type(edited)(**{**{f: getattr(edited, f) for f in edited.__slots__},
                               "version": "v1-ecc-growth"})
    worker = Worker(db, tampered, lambda: NOW)
    with pytest.raises(RuleError, match="min_increase: stored 32, now 16"):
        worker.register()
    assert db.fetchone("SELECT count(*) FROM gpu_health_predictions")[0] == 1
    db.close()
