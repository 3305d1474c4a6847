"""Shadow versions (``rules.shadow``): evaluated beside the active one every tick, stored and
backfilled like any version, never alerted, never in the default statistics.

Cards (hourly samples from day -8): ``slow`` degrades gently (about 8 new correctable errors a
day by day 8, never 32: only the shadow, with min_increase 8, warns of it) and fails on day 14;
``fast`` degrades steeply (both versions warn of it) and never fails; ``flat`` never moves.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.backtest.activity import tick_grid
from gpu_health.evaluator.backtest.rulesets import variants
from gpu_health.evaluator.compose import build_service
from gpu_health.evaluator.config.file import load_config
from gpu_health.evaluator.stats.document import prediction_stats
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.operations.alerts import open_alerts, open_new_alerts
from gpu_health.evaluator.store.predictions.prediction_state import open_predictions
from gpu_health.evaluator.store.statistics.api_queries import PredictionFilter, predictions_page
from gpu_health.evaluator.worker import Worker
from tests.conftest import NewDb
from tests.evaluator.backtest_support import V1_FILE
from tests.evaluator.rules_support import at, const, load, quadratic, ruleset, series, step

ACTIVE = ruleset(stats_min_matured=1, scan_interval_minutes=360)


def shadow_rules() -> object:
    [shadow] = variants([V1_FILE], [("min_increase", ["8"]), ("stats_min_matured", ["1"]),
                                    ("scan_interval_minutes", ["360"])])
    return shadow.ruleset


def build(db: Database) -> None:
    load(db, series("n-slow", 0, "GPU-slow", start=-8, end=24, every_minutes=60,
                    corrected=quadratic(0.5, onset=0), uncorrected=step(14, 0, 1)))
    load(db, series("n-fast", 0, "GPU-fast", start=-8, end=24, every_minutes=60,
                    corrected=quadratic(2, onset=0, base=10), uncorrected=const(0)))
    load(db, series("n-flat", 0, "GPU-flat", start=-8, end=24, every_minutes=60,
                    corrected=const(3), uncorrected=const(0)))


def run(db: Database, until: float) -> Worker:
    shadow = shadow_rules()
    worker = Worker(db, ACTIVE, sources=("real",), shadows=(shadow,))  # type: ignore[arg-type]
    worker.register(at(-1))
    for now in tick_grid(at(-1), at(until), ACTIVE.params.scan_interval):
        worker.tick(now)
    return worker


def rows(db: Database) -> list[tuple[str, str, bool | None, str]]:
    return [(str(n), str(v), s, str(st)) for n, v, s, st in db.fetchall(
        "SELECT node_id, rule_version, shadow, status FROM gpu_health_predictions "
        "ORDER BY node_id, rule_version, t0")]


def test_shadow_predictions_are_stored_backfilled_and_never_alerted(new_db: NewDb) -> None:
    db = new_db()
    build(db)
    worker = run(db, 10)
    shadow = worker.shadows[0].version
    got = rows(db)
    assert ("n-slow", shadow, True, "pending") in got  # only the shadow saw the slow card
    assert not any(n == "n-slow" and v == ACTIVE.version for n, v, _, _ in got)
    assert ("n-fast", ACTIVE.version, False, "pending") in got
    assert ("n-fast", shadow, True, "pending") in got
    # alerts: the active version's prediction opens n-fast's; the shadow's never opens n-slow's
    opened = {node for _, node, _ in open_new_alerts(db, at(10))}
    assert opened == {"n-fast"}
    assert {a.node_id for a in open_alerts(db, at(10))} == {"n-fast"}
    assert {p.node_id for p in open_predictions(db)} == {"n-fast"}
    # the slow card fails on day 14: the shadow's window is backfilled as a hit
    for now in tick_grid(at(10) + timedelta(hours=6), at(16), ACTIVE.params.scan_interval):
        worker.tick(now)
    assert ("n-slow", shadow, True, "hit") in rows(db)
    # after its fault the active version's strong signal predicts the slow card too: that
    # prediction, not the shadow's hit, is what opens its alert
    open_new_alerts(db, at(16))
    assert {(a.node_id, a.rule_version) for a in open_alerts(db, at(16))} == {
        ("n-fast", ACTIVE.version), ("n-slow", ACTIVE.version)}


def test_default_statistics_and_listing_leave_shadows_out(new_db: NewDb) -> None:
    db = new_db()
    build(db)
    worker = run(db, 16)
    shadow = worker.shadows[0]
    default = prediction_stats(db, now=at(16), since=at(-8), ruleset=ACTIVE)["windows"][0]
    own = prediction_stats(db, now=at(16), since=at(-8), ruleset=shadow,
                           rule_version=shadow.version)["windows"][0]
    assert default["rule_versions"] == [ACTIVE.version]
    assert own["rule_versions"] == [shadow.version]
    assert own["predictions"]["hit"] == 1 and default["predictions"]["hit"] == 0
    assert (own["predicted_faulty_cards"], default["predicted_faulty_cards"]) == (1, 0)
    page = predictions_page(db, PredictionFilter("real", at(16), 100, 0))
    assert {r["rule_version"] for r in page.rows} == {ACTIVE.version}
    assert all(r["shadow"] is False for r in page.rows)
    only = predictions_page(db, PredictionFilter("real", at(16), 100, 0,
                                                 rule_version=shadow.version))
    assert {r["rule_version"] for r in only.rows} == {shadow.version}
    assert all(r["shadow"] is True for r in only.rows)


def test_bad_shadow_lists_are_refused_with_every_problem(tmp_path: Path) -> None:
    eager = tmp_path / "v1-eager.yaml"
    eager.write_text(V1_FILE.read_text().replace("version: v1-ecc-growth", "version: v1-eager"))
    config = tmp_path / "evaluator.yml"
    config.write_text(f"storage:\n  path: {tmp_path / 'live.duckdb'}\n"
                      f"rules:\n  active: v1-ecc-growth\n"
                      f"  shadow: [v1-eager.yaml, v1-eager.yaml, {V1_FILE}, missing.yaml]\n")
    with pytest.raises(ConfigError) as err:
        build_service(load_config(config, {}), {}, start_loops=False)
    text = str(err.value)
    for needle in ("version v1-eager is listed twice", "is the active version v1-ecc-growth",
                   "missing.yaml: cannot read"):
        assert needle in text
    assert not (tmp_path / "live.duckdb").exists()  # refused before the store is opened


def test_an_edited_shadow_file_is_not_run_and_the_evaluator_still_starts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A shadow file edited after its version made predictions (other parameters, same name)
    stopped the whole evaluator from starting; now that shadow is left out and said once, and
    the active version runs. An edited *active* file still refuses the start."""
    import logging

    from tests.evaluator.api_support import add_prediction

    eager = tmp_path / "v1-eager.yaml"
    eager.write_text(V1_FILE.read_text().replace("version: v1-ecc-growth", "version: v1-eager"))
    config = tmp_path / "evaluator.yml"
    config.write_text(f"storage:\n  path: {tmp_path / 'live.duckdb'}\n"
                      "rules:\n  active: v1-ecc-growth\n  shadow: [v1-eager.yaml]\n")
    first = build_service(load_config(config, {}), {}, start_loops=False)
    assert [s.version for s in first.worker.shadows] == ["v1-eager"]
    add_prediction(first.db, "p-eager", "n1", 0, at(0), rule_version="v1-eager", shadow=True)
    first.db.close()  # the version has made a prediction: its parameters are frozen
    eager.write_text(eager.read_text().replace("min_increase: 32 ", "min_increase: 9  "))
    with caplog.at_level(logging.ERROR):
        second = build_service(load_config(config, {}), {}, start_loops=False)
    try:
        assert second.worker.shadows == () and second.worker.ruleset.version == "v1-ecc-growth"
        assert "shadow version v1-eager" in caplog.text and "not run" in caplog.text
    finally:
        second.db.close()
