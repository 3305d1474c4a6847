"""``gpu-health-evaluator backtest`` as a user runs it: refusals, the marker, the outputs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.backtest.report import summary_sentence
from gpu_health.evaluator.compose import build_service
from gpu_health.evaluator.config.file import load_config
from gpu_health.evaluator.main import main
from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.history.backtest import MARKER, open_backtest
from gpu_health.evaluator.store.readings.samples import insert_samples
from tests.evaluator.backtest_support import V1_FILE

T0 = datetime(2026, 2, 1, tzinfo=UTC)


def events_csv(path: Path) -> Path:
    """Two devices of one server: one with correctable errors, then an uncorrectable one; one
    with a single uncorrectable error."""
    lines = ["Datacenter,Server,Name,Time,EccType"]
    for k in range(40):
        lines.append(f"DC1,s1,DSA1,{int((T0 + timedelta(hours=k)).timestamp())},CE")
    lines.append(f"DC1,s1,DSA1,{int((T0 + timedelta(days=3)).timestamp())},UER")
    lines.append(f"DC1,s1,DSA2,{int((T0 + timedelta(days=1)).timestamp())},UEO")
    path.write_text("\n".join(lines) + "\n")
    return path


def run(tmp_path: Path, *args: str) -> int:
    return main(["backtest", "--rules", str(V1_FILE), "--no-progress", *args])


def events_args(tmp_path: Path) -> list[str]:
    return ["--events", str(events_csv(tmp_path / "events.csv")), "--preset", "calchas"]


def test_refuses_the_live_database_of_the_config(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "evaluator.yml"
    config.write_text("storage:\n  path: live/gpu.duckdb\n")
    live = tmp_path / "live" / "gpu.duckdb"
    for db in (live, tmp_path / "live" / ".." / "live" / "gpu.duckdb"):
        code = run(tmp_path, "--config", str(config), "--db", str(db), *events_args(tmp_path))
        assert code == 2
        assert "is the live database" in capsys.readouterr().err
    assert not live.exists()  # refused before anything was opened or created
    live.parent.mkdir(exist_ok=True)
    DuckDBDatabase(live).close()
    link = tmp_path / "innocent.duckdb"
    link.symlink_to(live)
    assert run(tmp_path, "--config", str(config), "--db", str(link),
               *events_args(tmp_path)) == 2


def test_refuses_the_default_live_path_without_a_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(tmp_path, "--db", "data/gpu-health.duckdb", *events_args(tmp_path)) == 2
    assert "live database" in capsys.readouterr().err
    assert not (tmp_path / "data" / "gpu-health.duckdb").exists()


def test_refuses_a_file_with_samples_not_written_by_a_backtest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "copy-of-live.duckdb"
    db = DuckDBDatabase(path)
    insert_samples(db, [Sample(CardKey("n1", 0), "GPU-1", T0, Counters(0, 5))])
    db.close()
    assert run(tmp_path, "--db", str(path), *events_args(tmp_path)) == 2
    assert "not written by a backtest" in capsys.readouterr().err
    db = DuckDBDatabase(path, read_only=True)
    assert db.fetchone("SELECT count(*) FROM gpu_health_samples")[0] == 1
    assert db.fetchone("SELECT count(*) FROM information_schema.tables "
                       "WHERE table_name = $table", {"table": MARKER})[0] == 0
    db.close()


def test_import_then_replay_again_on_the_marked_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out, png = tmp_path / "bt.duckdb", tmp_path / "r.json", tmp_path / "r.png"
    assert run(tmp_path, "--db", str(path), *events_args(tmp_path), "--output", str(out),
               "--plot", str(png), "--sweep", "window_days=7,30") == 0
    text = capsys.readouterr().out
    assert "precision" in text and "assumption: a card is observed only" in text
    assert f"database: {path} (kept: replay it again with --db)" in text.splitlines()
    report = json.loads(out.read_text())
    for version in report["versions"]:
        assert summary_sentence(version) in text.splitlines()
    assert [v["window_days"] for v in report["versions"]] == [7, 30]
    assert report["input"]["cards"] == 2 and report["input"]["observe_after_days"] == 30
    assert report["base_rates"]["cards_with_fault"] == 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the baselines ran beside, once per window, through the same engine, in the same shape
    baselines = report["baselines"]
    assert sorted((b["base_version"], b["window_days"]) for b in baselines) == [
        ("baseline-new-correctable", 7), ("baseline-new-correctable", 30),
        ("baseline-repeat", 7), ("baseline-repeat", 30)]
    for entry in (*report["versions"], *baselines):
        assert set(entry["by_class"]) == {"first_fault", "repeat"}
        for cls in entry["by_class"].values():
            assert {"predictions", "matured", "precision", "recall", "f1", "faulty_cards",
                    "predicted_faulty_cards", "missed_cards"} <= set(cls)
    for version in report["versions"]:
        assert len(version["lift"]) == 2  # the two baselines of its own window
        assert "flag" in version
    assert "baseline baseline-repeat" in text and "1st-fault n P/R" in text
    # importing again would double the history
    assert run(tmp_path, "--db", str(path), *events_args(tmp_path)) == 2
    assert "already holds" in capsys.readouterr().err
    # without an input the samples are replayed again: same numbers, same assumptions
    again = tmp_path / "again.json"
    assert run(tmp_path, "--db", str(path), "--output", str(again),
               "--sweep", "window_days=7,30") == 0
    second = json.loads(again.read_text())
    assert second["versions"][0]["predictions"] == report["versions"][0]["predictions"]
    assert second["input"]["assumptions"] == report["input"]["assumptions"]
    db = DuckDBDatabase(path, read_only=True)
    assert db.fetchone(f"SELECT count(*) FROM {MARKER} WHERE report IS NOT NULL")[0] == 2
    db.close()


def test_every_argument_problem_is_listed(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = run(tmp_path, "--events", str(tmp_path / "e.csv"), "--since", "2026-01-01",
               "--sweep", "ratio=abc", "--sweep", "scan_interval_minutes=10,20",
               "--sweep", "bogus=1", "--sweep", "window_days=14", "--step", "soon")
    assert code == 2
    err = capsys.readouterr().err
    for needle in ("--since '2026-01-01' is neither ISO 8601", "--events needs --preset",
                   "ratio: must be a number", "scan_interval_minutes is not a frozen",
                   "'bogus' is not a rule parameter", "window_days: must be one of 7, 30",
                   "--step must be a positive duration"):
        assert needle in err


def test_a_combination_the_rule_cannot_take_is_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # ratio 8 > B/g = 7: the live loader would ignore it with a warning; a sweep must not
    code = run(tmp_path, "--db", str(tmp_path / "bt.duckdb"), *events_args(tmp_path),
               "--sweep", "ratio=1.2,8")
    assert code == 2
    assert "ratio 8.0 can never be reached" in capsys.readouterr().err
    assert not (tmp_path / "bt.duckdb").exists()


def test_bad_events_file_fails_before_a_database_exists(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("Datacenter,Server,Name,Time,EccType\nDC1,s1,DSA1,1650690000,XID79\n")
    code = run(tmp_path, "--db", str(tmp_path / "bt.duckdb"), "--events", str(bad),
               "--preset", "calchas")
    assert code == 2
    assert "'XID79'" in capsys.readouterr().err
    assert not (tmp_path / "bt.duckdb").exists()


def test_a_live_evaluator_refuses_a_backtest_file(tmp_path: Path) -> None:
    path = tmp_path / "bt.duckdb"
    db = open_backtest(path, live=(), importing=True)
    insert_samples(db, [Sample(CardKey("n1", 0), "GPU-1", T0, Counters(0, 5))])
    db.close()
    config = tmp_path / "evaluator.yml"
    config.write_text(f"storage:\n  path: {path}\nrules: {{active: v1-ecc-growth}}\n")
    with pytest.raises(ConfigError, match=f"storage.path {path} is a backtest file"):
        build_service(load_config(config, {}), {}, start_loops=False)
    db = DuckDBDatabase(path, read_only=True)  # closed again, its history untouched
    assert db.fetchone("SELECT count(*) FROM gpu_health_samples")[0] == 1
    assert db.fetchone("SELECT count(*) FROM gpu_health_rule_versions")[0] == 0
    db.close()


def test_events_replay_one_part_with_costs(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``--since``/``--until`` with ``--events``: the whole file is imported, one part of it
    replayed and measured; the costs add GPU-hours saved and a column."""
    out = tmp_path / "r.json"
    since = T0 + timedelta(days=2)
    assert run(tmp_path, "--db", str(tmp_path / "bt.duckdb"), *events_args(tmp_path),
               "--since", since.isoformat(), "--output", str(out), "--no-baselines",
               "--cost-failure", "100", "--cost-mitigation", "2",
               "--mitigation-time", "30m") == 0
    assert "GPU-h saved" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["period"]["since"] == "2026-02-03T00:00:00Z"
    assert report["input"]["replayed_period"]["since"] == since.isoformat()
    assert report["input"]["cards"] == 2  # imported whole
    [version] = report["versions"]
    # DSA2's fault (day 1) lies before the part: only DSA1's (day 3) is in it
    assert version["faulty_cards"] == 1
    assert report["costs"] == {"cost_failure_gpu_hours": 100.0,
                               "cost_mitigation_gpu_hours": 2.0,
                               "mitigation_time_seconds": 1800.0}
    made = sum(version["predictions"].values())
    saved = version["by_class"]["first_fault"]["gpu_hours_saved"] + \
        version["by_class"]["repeat"]["gpu_hours_saved"]
    assert version["gpu_hours_saved"] == saved
    assert saved == 100 * version["by_class"]["first_fault"]["predicted_faulty_cards"] \
        + 100 * version["by_class"]["repeat"]["predicted_faulty_cards"] - 2 * made


def test_a_period_that_leaves_nothing_is_refused(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = run(tmp_path, "--db", str(tmp_path / "bt.duckdb"), *events_args(tmp_path),
               "--since", (T0 + timedelta(days=400)).isoformat())
    assert code == 2
    assert "leave nothing of the history" in capsys.readouterr().err
    assert not (tmp_path / "bt.duckdb").exists()  # a file made for nothing is not kept
