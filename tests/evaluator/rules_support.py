"""Small builders for the rules/worker/backfill/stats tests: sample series, rule sets, rows.

Series are built from plain functions of "days since start" so each test states its scenario in
one line (``corrected=quadratic(2, onset=0)``). Counters are ``None`` (unknown) unless given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpu_health.clock import to_naive_utc
from gpu_health.evaluator.config.rules import RULES_DIR, load_ruleset
from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.rules.evaluation import CardFeatures
from gpu_health.evaluator.rules.params import RuleParams
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.samples import insert_samples

Curve = Callable[[float], int | None]
START = datetime(2026, 1, 1, tzinfo=UTC)


V1_FILE = RULES_DIR / "v1-ecc-growth.yaml"  # ECC-only fault events
V2_FILE = RULES_DIR / "v2-ecc-xid.yaml"  # v1's thresholds + memory XIDs as fault events


def ruleset(file: Path = V1_FILE, **env: object) -> RuleSet:
    """A repository rule file (v1 unless told) with GPU_HEALTH_RULE_<KEY> overrides given as
    kwargs (a list value is written comma-separated, as an operator would)."""
    def text(value: object) -> str:
        return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)

    return load_ruleset(file, env={f"GPU_HEALTH_RULE_{k.upper()}": text(v)
                                   for k, v in env.items()})


def ruleset_v2(**env: object) -> RuleSet:
    return ruleset(V2_FILE, **env)


PARAMS: RuleParams = ruleset().params


def params(**changes: Any) -> RuleParams:
    return replace(PARAMS, **changes)


def const(value: int | None) -> Curve:
    return lambda t: value


def quadratic(a: float, onset: float, base: int = 0) -> Curve:
    """Cumulative errors of a degrading chip: base + a * (t - onset)^2 after onset."""
    return lambda t: base + math.floor(a * max(t - onset, 0.0) ** 2)


def step(at: float, before: int, after: int) -> Curve:
    return lambda t: after if t >= at else before


def series(
    node: str,
    gpu: int,
    uuid: str | None,
    *,
    start: float,
    end: float,
    every_minutes: int = 30,
    origin: datetime = START,
    source: str = "real",
    corrected: Curve | None = None,
    uncorrected: Curve | None = None,
    retired: Curve | None = None,
    pending: Curve | None = None,
    failure: Curve | None = None,
) -> list[Sample]:
    """Samples every ``every_minutes`` for t in [start, end] days after ``origin``; a counter
    without a curve is unknown (None) throughout."""
    curves = [c or const(None) for c in (uncorrected, corrected, retired, pending, failure)]
    rows: list[Sample] = []
    n = round((end - start) * 1440 / every_minutes)
    for i in range(n + 1):
        t = start + i * every_minutes / 1440
        rows.append(Sample(
            CardKey(node, gpu, source), uuid, origin + timedelta(days=t),
            Counters(*(c(t) for c in curves)),
        ))
    return rows


def at(days: float, origin: datetime = START) -> datetime:
    return origin + timedelta(days=days)


def open_db(tmp_path: Path, name: str = "t.duckdb") -> Database:
    return DuckDBDatabase(tmp_path / name)


def load(db: Database, *groups: Iterable[Sample]) -> None:
    for group in groups:
        insert_samples(db, list(group))


def features(corrected: tuple[int | None, ...], baseline: int | None, *,
             samples: int = 2016, **values: Any) -> CardFeatures:
    """Hand-made features for pure signal tests (t0 = START)."""
    return CardFeatures(
        node_id="n1", gpu_index=0, gpu_uuid="GPU-1", source="real", at=START, t0=START,
        corrected=corrected, corrected_baseline=baseline, baseline_samples=samples, **values,
    )


def insert_prediction(db: Database, *, pid: str, node: str, gpu: int, uuid: str | None,
                      t0: datetime, window_days: int = 7, status: str = "pending",
                      source: str = "real", version: str = "v1-ecc-growth",
                      unc0: int | None = 0) -> None:
    """A prediction row written directly (stats tests need exact, hand-counted sets)."""
    db.execute(
        "INSERT INTO gpu_health_predictions (id, node_id, gpu_index, gpu_uuid, source, "
        "rule_version, window_days, t0, window_end, predicted_at, signal, layer, evidence, "
        "uncorrected_at_t0, status) VALUES ($id, $node, $gpu, $uuid, $source, $version, $days, "
        "$t0, $t0 + to_days($days), $t0, 'ecc_corrected_growth', 'trend', 'test', $unc0, "
        "$status)",
        {"id": pid, "node": node, "gpu": gpu, "uuid": uuid, "source": source,
         "version": version, "days": window_days, "t0": to_naive_utc(t0), "unc0": unc0,
         "status": status},
    )
