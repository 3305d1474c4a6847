"""Prediction state on /metrics: the snapshot renders open predictions, outcomes, ratios (absent
when the statistics say null), fleet numbers and the capability matrix, real data only; names
pass the real ``promtool check metrics``; the service serves it from a snapshot."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, generate_latest

from gpu_health.evaluator.compose import build_service
from gpu_health.evaluator.config.file import load_config
from gpu_health.evaluator.stats.state_collector import PredictionState, compute_snapshot
from gpu_health.evaluator.store import Database
from tests.conftest import NewDb
from tests.evaluator.api_support import NOW, add_prediction, build_dataset
from tests.evaluator.backtest_support import v1
from tests.evaluator.ingest_support import FakeClock
from tests.evaluator.rules_support import ruleset
from tests.promtool import promtool

SHADOW = v1(min_increase=8)



@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    database = new_db("state")
    build_dataset(database)
    yield database
    database.close()


def exposition(db: Database, **kwargs: object) -> tuple[str, CollectorRegistry]:
    registry = CollectorRegistry()
    state = PredictionState(db, FakeClock(NOW), ruleset=None, retention_days=180,
                            registry=registry, **kwargs)  # type: ignore[arg-type]
    state.collector.snapshot = compute_snapshot(db, NOW)
    return generate_latest(registry).decode(), registry


def lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")
            or line.startswith(name + " ")]


def test_nothing_before_the_first_snapshot(db: Database) -> None:
    registry = CollectorRegistry()
    PredictionState(db, FakeClock(NOW), ruleset=None, retention_days=180, registry=registry)
    assert "gpu_health_" not in generate_latest(registry).decode()


def test_open_predictions_are_real_pending_ones_with_their_labels(db: Database) -> None:
    text, _ = exposition(db)
    [line] = lines(text, "gpu_health_prediction_open")
    assert line == ('gpu_health_prediction_open{gpu="0",layer="trend",node="n1",'
                    'rule_version="v1-ecc-growth",signal="corrected_growth",uuid="GPU-x",'
                    'window_days="7"} 1.0')
    [end] = lines(text, "gpu_health_prediction_open_window_end_timestamp_seconds")
    assert float(end.rsplit(" ", 1)[1]) == (NOW + timedelta(days=6)).timestamp()
    assert "sim-node" not in text  # simulated data never reaches the dashboards


def test_ratios_are_absent_while_insufficient(db: Database) -> None:
    text, _ = exposition(db)
    for name in ("precision", "recall", "f1", "precision_ci95_lower", "precision_ci95_upper",
                 "recall_ci95_lower", "recall_ci95_upper"):
        assert lines(text, f"gpu_health_prediction_{name}") == []
    assert 'gpu_health_prediction_stats_sufficient{window_days="7"} 0.0' in text
    assert 'gpu_health_prediction_outcomes{status="hit",window_days="7"} 1.0' in text
    assert 'gpu_health_prediction_outcomes{status="voided",window_days="7"} 1.0' in text
    assert 'gpu_health_prediction_outcomes{status="pending",window_days="30"} 0.0' in text
    assert 'gpu_health_prediction_matured{window_days="7"} 2.0' in text


def test_ratios_appear_once_sufficient(db: Database) -> None:
    for i in range(4):
        add_prediction(db, f"extra-{i}", "n2", 0, NOW - timedelta(days=3 + i), status="hit")
    rules = ruleset(stats_min_matured=2, stats_min_observed_days=1)
    registry = CollectorRegistry()
    state = PredictionState(db, FakeClock(NOW), ruleset=rules, retention_days=180,
                            registry=registry)
    state.collector.snapshot = compute_snapshot(db, NOW, ruleset=rules)
    text = generate_latest(registry).decode()
    assert 'gpu_health_prediction_precision{window_days="7"} 0.8333333333333334' in text
    assert 'gpu_health_prediction_stats_sufficient{window_days="7"} 1.0' in text
    # 5 hits of 6 matured: the Wilson bounds, each its own series
    assert 'gpu_health_prediction_precision_ci95_lower{window_days="7"} 0.436497' in text
    assert 'gpu_health_prediction_precision_ci95_upper{window_days="7"} 0.969947' in text
    assert ('gpu_health_prediction_class_precision_ci95_lower{class="first_fault",'
            'window_days="7"}') in text
    # the 30-day precision is null (nothing matured): so are its bounds
    assert len(lines(text, "gpu_health_prediction_precision_ci95_lower")) == 1


def test_capability_matrix_and_stall(db: Database) -> None:
    text, _ = exposition(db)
    capability = lines(text, "gpu_health_card_capability")
    assert len(capability) == 5 * 5  # n1/0, n1/1, n2/0, n3/0, n3/1 (real cards)
    assert ('gpu_health_card_capability{gpu="1",metric="ecc_uncorrected_total",node="n1",'
            'uuid=""} 1.0') in capability
    assert ('gpu_health_card_capability{gpu="1",metric="ecc_corrected_total",node="n1",'
            'uuid=""} 0.0') in capability
    assert 'gpu_health_card_collection_stalled{gpu="1",node="n1",uuid=""} 1.0' in text
    assert 'gpu_health_card_collection_stalled{gpu="0",node="n1",uuid="GPU-n1-0"} 0.0' in text
    assert "gpu_health_monitorable_cards 5.0" in text
    assert lines(text, "gpu_health_exposure_card_seconds")
    assert lines(text, "gpu_health_observed_span_seconds")


def test_snapshot_age_follows_the_clock(db: Database) -> None:
    clock = FakeClock(NOW)
    registry = CollectorRegistry()
    state = PredictionState(db, clock, ruleset=None, retention_days=180, registry=registry)
    state.collector.snapshot = compute_snapshot(db, NOW)
    clock.advance(seconds=42)
    text = generate_latest(registry).decode()
    assert "gpu_health_evaluator_prediction_snapshot_age_seconds 42.0" in text


async def test_refresh_keeps_within_a_tenth_of_a_database_thread(db: Database) -> None:
    ticks = iter([0.0, 0.001, 1000.0])  # monotonic readings of three refreshes
    state = PredictionState(db, FakeClock(NOW), ruleset=None, retention_days=180,
                            registry=CollectorRegistry(), monotonic=lambda: next(ticks))
    first = await state.refresh()
    assert first is not None
    assert await state.refresh() is None  # 1 ms later: under 10 x its duration
    assert await state.refresh() is not None


MINE = ("gpu_health_prediction_", "gpu_health_card_", "gpu_health_monitorable_",
        "gpu_health_exposure_", "gpu_health_observed_", "gpu_health_evaluator_alert",
        "gpu_health_evaluator_prediction_snapshot_")


def ours(text: str) -> str:
    """The families this issue adds (the alert loop's and the snapshot's), from a full page."""
    keep, out = False, []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            keep = line.split()[2].startswith(MINE)
        if keep:
            out.append(line)
    assert out
    return "\n".join(out) + "\n"


def check_promtool(text: str) -> None:
    result = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_names_pass_promtool_check_metrics(db: Database) -> None:
    text, _ = exposition(db)
    check_promtool(text)


async def test_the_service_serves_the_snapshot_and_the_resolve_route(tmp_path: Path) -> None:
    config_file = tmp_path / "evaluator.yml"
    config_file.write_text(
        "storage: {path: ev.duckdb}\nrules: {active: v1-ecc-growth}\n"
        "alerting: {alertmanagers: []}\n", encoding="utf-8")
    service = build_service(load_config(config_file, {}), {}, clock=FakeClock(NOW),
                            start_loops=False)
    assert service.alerts is not None
    add_prediction(service.db, "p1", "n1", 0, NOW - timedelta(hours=1))
    async with TestClient(TestServer(service.web_app, host="127.0.0.1")) as client:
        await service.prediction_state.refresh()
        await service.alerts.tick()
        async with client.get("/metrics") as response:
            text = await response.text()
        assert "gpu_health_prediction_open{" in text
        assert "gpu_health_evaluator_alerts_open 1.0" in text
        check_promtool(ours(text))
        async with client.post("/api/v1/gpu-health/alerts/n1/resolve",
                               json={"reason": "checked"}) as response:
            assert response.status == 200, await response.text()


def test_shadow_versions_get_their_own_series_beside_the_active_one(db: Database) -> None:
    for i in range(3):
        add_prediction(db, f"shadow-{i}", "n2", 0, NOW - timedelta(days=2 + i), status="hit",
                       rule_version=SHADOW.version, shadow=True)
    active = ruleset(stats_min_matured=2, stats_min_observed_days=1)
    shadow = replace(SHADOW, params=replace(active.params, stats_min_matured=2))
    registry = CollectorRegistry()
    state = PredictionState(db, FakeClock(NOW), ruleset=active, retention_days=180,
                            registry=registry, shadows=(shadow,))
    state.collector.snapshot = compute_snapshot(db, NOW, ruleset=active, shadows=(shadow,))
    text = generate_latest(registry).decode()
    own = (f'class="all",role="shadow",rule_version="{shadow.version}",window_days="7"')
    assert f"gpu_health_prediction_version_matured{{{own}}} 3.0" in text
    assert f"gpu_health_prediction_version_precision{{{own}}} 1.0" in text
    assert f"gpu_health_prediction_version_precision_ci95_lower{{{own}}}" in text
    assert f'role="active",rule_version="{active.version}"' in text
    # the default families count the active version's predictions only
    assert 'gpu_health_prediction_outcomes{status="hit",window_days="7"} 1.0' in text
    check_promtool(text)
    # without shadow versions nothing per version is computed or shown
    plain, _ = exposition(db)
    assert lines(plain, "gpu_health_prediction_version_matured") == []
