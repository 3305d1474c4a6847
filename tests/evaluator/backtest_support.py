"""Shared builders for the backtest tests: a small mixed fleet, rule sets, table dumps.

The fleet (``mixed_fleet``) holds one card per behaviour the replay must get right, so the
equivalence test (batched, tick-skipping replay vs. :meth:`Worker.tick` at every tick) meets
every path of the engine: growth hits and misses, a fault without precursor (strong signal after
it), a card swap and a collection stall (voided), a burst (shape gate), pending-remap and
retired-page growth, a remap failure, unknown uncorrectable counts and a flat card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.rules_support import const, load, quadratic, series, step
from tests.shared import REPO

V1_FILE = REPO / "rules" / "v1-ecc-growth.yaml"


def v1(**env: object) -> RuleSet:
    """rules/v1-ecc-growth.yaml with GPU_HEALTH_RULE_<KEY> overrides given as kwargs."""
    return load_ruleset(V1_FILE, env={f"GPU_HEALTH_RULE_{k.upper()}": str(v)
                                      for k, v in env.items()})


def mixed_fleet(db: Database, every_minutes: int = 30) -> None:
    """Samples from day -8 to day 30 (START = 2026-01-01)."""
    degrading = quadratic(2, onset=0, base=10)

    def card(gpu: int, uuid: str, *, start: float = -8, end: float = 30, **curves: Any) -> None:
        load(db, series("n1", gpu, uuid, start=start, end=end, every_minutes=every_minutes,
                        **curves))

    card(0, "GPU-hit", corrected=degrading, uncorrected=step(12, 0, 1))
    card(1, "GPU-miss", corrected=degrading, uncorrected=const(0))
    card(2, "GPU-fault-only", corrected=const(3), uncorrected=step(6, 0, 2))
    card(3, "GPU-swap", end=13, corrected=degrading, uncorrected=const(0))
    card(3, "GPU-new", start=13.02, corrected=const(0), uncorrected=const(0))
    card(4, "GPU-stall", end=11, corrected=degrading, uncorrected=const(0))
    card(5, "GPU-burst", corrected=step(9, 5, 900), uncorrected=const(0))
    card(6, "GPU-remap", corrected=const(0), uncorrected=const(0),
         pending=lambda t: 0 if t < 10 else 1 if t < 10.5 else 2, failure=step(20, 0, 1))
    card(7, "GPU-retired", corrected=const(0), uncorrected=const(0),
         retired=lambda t: 0 if t < 4 else int(t))
    card(8, "GPU-unknown", corrected=degrading)
    card(9, "GPU-flat", corrected=const(7), uncorrected=const(0))
    load(db, series("n2", 0, "GPU-late", start=15, end=30, every_minutes=every_minutes,
                    corrected=quadratic(3, onset=15), uncorrected=step(26, 0, 1)))


def dump(db: Database, table: str, order: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.fetchall(f"SELECT * FROM {table} ORDER BY {order}")]


def predictions(db: Database) -> list[tuple[Any, ...]]:
    return dump(db, "gpu_health_predictions", "id")


def fresh(tmp_path: Path, name: str) -> Database:
    return DuckDBDatabase(tmp_path / name)
