"""``gpu-health-evaluator demo --duration``: a short bounded run as CI does it (exporter with the
fake tools + evaluator on a fresh store), and that readings of the fake tools are stored as
simulated data, never as real data (not even in a store that holds real data)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.samples import insert_samples
from tests.shared import REPO

BIN = Path(sys.executable).parent / "gpu-health-evaluator"


def run_demo(tmp_path: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    # PATH = this venv only: no real nvidia-smi (even on a GPU machine), so the fake tools run
    # (their "#!/usr/bin/env python3" finds the venv's python3).
    env = {**os.environ, "PATH": str(BIN.parent)}
    return subprocess.run([str(BIN), "demo", "--port", "0", "--exporter-port", "0", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_bounded_demo_runs_the_chain_and_stops_cleanly(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "--duration", "8", "--storage", "demo.duckdb")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "gpu-health demo is running" in out and "stopping the demo" in out
    exporter = re.search(r"exporter   (http://127\.0\.0\.1:\d+)/metrics", out)
    evaluator = re.search(r"page       (http://127\.0\.0\.1:\d+)/\?source=simulated\n", out)
    assert exporter and evaluator, out
    assert "predictions?source=simulated" in out and "awaiting calibration" in out
    for url in (exporter.group(1), evaluator.group(1)):  # both are gone after the run
        try:
            urllib.request.urlopen(url + "/metrics", timeout=2)
        except OSError:
            continue
        raise AssertionError(f"{url} still answers after the demo ended")
    db = DuckDBDatabase(tmp_path / "demo.duckdb", read_only=True)
    try:
        sources = dict(db.fetchall("SELECT source, count(*) FROM gpu_health_samples GROUP BY 1"))
        assert sources["simulated"] > 10_000 and "real" not in sources  # fake readings: simulated
        live = db.fetchone("SELECT count(*) FROM gpu_health_samples "
                           "WHERE source = 'simulated' AND node_id = 'demo-node-01'")[0]
        assert live >= 1  # the live node scraped from the fake tool
        simulated = db.fetchone("SELECT count(*) FROM gpu_health_predictions "
                                "WHERE source = 'simulated'")[0]
        assert simulated >= 1  # the degrading profiles fire at start-up ...
        assert db.fetchone("SELECT count(*) FROM gpu_health_alerts")[0] == 0  # ... never alert
    finally:
        db.close()


def test_demo_never_writes_real_rows_and_leaves_real_data_alone(tmp_path: Path) -> None:
    store = tmp_path / "prod.duckdb"
    db = DuckDBDatabase(store)
    insert_samples(db, [Sample(CardKey("gpu-prod-07", 0), "GPU-1", datetime.now(UTC),
                               Counters(ecc_corrected_total=3))])
    db.close()
    result = run_demo(tmp_path, "--duration", "4", "--storage", str(store))
    assert result.returncode == 0, result.stdout + result.stderr
    db = DuckDBDatabase(store, read_only=True)
    try:
        real = db.fetchall("SELECT node_id, gpu_uuid, ecc_corrected_total FROM gpu_health_samples "
                           "WHERE source = 'real'")
        assert real == [("gpu-prod-07", "GPU-1", 3)]
    finally:
        db.close()


def test_the_banner_lists_every_url_the_docs_name() -> None:
    from gpu_health.evaluator.demo import DEMO_NODE
    from gpu_health.evaluator.demo.banner import banner_text

    banner = banner_text("http://127.0.0.1:10347", "http://127.0.0.1:10346", "the fake tool",
                         Path("data/demo.duckdb"), 1, DEMO_NODE, "simulated", Path("/tmp/x"))
    table = (REPO / "docs" / "demo.md").read_text(encoding="utf-8")
    urls = re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)
    assert len(urls) >= 9
    for url in urls:
        tail = url.removeprefix("...").removeprefix("http://127.0.0.1:10347")
        assert tail in banner, tail
    assert "every 60 s" in banner


def test_the_live_card_fails_within_minutes_and_the_demo_predicts_every_minute(
        tmp_path: Path) -> None:
    from gpu_health.evaluator.compose import build_service
    from gpu_health.evaluator.config.file import parse_config
    from gpu_health.evaluator.demo import ADVANCE_SECONDS, WORKER_SECONDS, FakeCard

    card = FakeCard(tmp_path / "state.json")
    card.write()
    advances = 0
    while card.uncorrected == 0:
        card.advance()
        advances += 1
    assert advances * ADVANCE_SECONDS <= 180  # the strong signal is there within 3 minutes
    assert json.loads(card.path.read_text())["cards"]["0"][
        "ecc.errors.uncorrected.aggregate.total"] == 1
    config = parse_config({"storage": {"path": "demo.duckdb"}}, base=tmp_path)
    service = build_service(config, {}, start_loops=False, worker_interval=WORKER_SECONDS)
    try:
        assert service.app.loops["worker"].interval == 60.0
    finally:
        service.db.close()


def test_the_live_card_is_warned_about_before_its_fault(tmp_path: Path) -> None:
    """The live card's seeded days plus what the exporter reads every 5 s while the fake card
    advances every 10 s, judged by the real worker with the default v2 rules at the demo's
    minute ticks: a trend prediction within two minutes, before the uncorrectable error."""
    from gpu_health.evaluator.config.rules import load_ruleset
    from gpu_health.evaluator.demo import (
        ADVANCE_SECONDS,
        COLLECT_SECONDS,
        DEMO_NODE,
        FAKE_UUID,
        HISTORY_STEP,
        WORKER_SECONDS,
        FakeCard,
    )
    from gpu_health.evaluator.simulate.profiles import LIVE_DAILY, live_history
    from gpu_health.evaluator.simulate.writer import write_series
    from gpu_health.evaluator.worker import Worker

    start = datetime(2026, 3, 1, tzinfo=UTC)
    key = CardKey(DEMO_NODE, 0, "simulated")
    card = FakeCard(tmp_path / "state.json", sum(LIVE_DAILY))
    live, fault_at, elapsed, advances = [], None, 0.0, 0
    while elapsed <= 300:
        while advances < elapsed // ADVANCE_SECONDS:  # the demo advances the card every 10 s
            card.advance()
            advances += 1
        if card.uncorrected and fault_at is None:
            fault_at = start + timedelta(seconds=elapsed)
        live.append(Sample(key, FAKE_UUID, start + timedelta(seconds=elapsed), Counters(
            card.uncorrected, card.corrected, None, 0, 0)))
        elapsed += COLLECT_SECONDS
    assert fault_at is not None and fault_at - start >= timedelta(minutes=2)
    store = tmp_path / "demo.duckdb"
    write_series(store, [*live_history(key, FAKE_UUID, start, HISTORY_STEP), *live])
    db = DuckDBDatabase(store)
    try:
        worker = Worker(db, load_ruleset(REPO / "rules" / "v2-ecc-xid.yaml", env={}))
        first = None
        for tick in range(5):
            made = worker.tick(start + timedelta(seconds=tick * WORKER_SECONDS)).predictions
            if tick == 0:
                assert made == (), "the seeded days alone predict nothing"
            if made and first is None:
                first = made[0]
        assert first is not None and (first.node_id, first.layer) == (DEMO_NODE, "trend")
        assert first.t0 - start <= timedelta(minutes=2) and first.t0 < fault_at
        status = db.fetchone("SELECT status FROM gpu_health_predictions WHERE id = $id",
                             {"id": first.id})[0]
        assert status == "hit", "the uncorrectable error inside its window makes it a hit"
    finally:
        db.close()


def test_the_demo_refuses_before_it_writes_anything(tmp_path: Path) -> None:
    """A bad --config, or a rule set that does not load, is refused with exit 2 and the store
    is never created (it used to be seeded with 30,000 rows first)."""
    bad = tmp_path / "bad.yml"
    for text, reason in (("scrape: {interval: soon}\n", "scrape.interval"),
                         ("rules: {active: v9-missing}\n", "v9-missing")):
        bad.write_text(text)
        result = run_demo(tmp_path, "--config", str(bad), "--storage", "demo.duckdb")
        assert result.returncode == 2, result.stdout + result.stderr
        assert reason in result.stderr
        assert not (tmp_path / "demo.duckdb").exists() and not (tmp_path / "data").exists()


def _start_demo(tmp_path: Path) -> tuple[subprocess.Popen[str], str, Path]:
    env = {**os.environ, "PATH": str(BIN.parent)}
    demo = subprocess.Popen([str(BIN), "demo", "--port", "0", "--exporter-port", "0",
                             "--storage", "demo.duckdb"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert demo.stdout is not None
    exporter, folder = "", None
    for line in demo.stdout:
        if line.startswith("  exporter "):
            exporter = line.split()[1]
        if line.startswith("  files "):
            folder = Path(line.split()[1])
            break
    assert exporter and folder is not None and folder.is_dir(), "no banner"
    return demo, exporter, folder


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGHUP, signal.SIGTERM],
                         ids=["SIGKILL", "SIGHUP", "SIGTERM"])
def test_the_exporter_and_the_folder_end_with_the_demo(tmp_path: Path, signum: int) -> None:
    """However the evaluator ends (a killed process runs no cleanup of its own), the exporter
    it started stops and its temporary folder is removed, within a few seconds."""
    demo, exporter, folder = _start_demo(tmp_path)
    try:
        assert _answers(exporter)
        demo.send_signal(signum)
        demo.wait(60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (_answers(exporter) or folder.exists()):
            time.sleep(0.2)  # polling the guard's reaction, bounded by the deadline
        assert not _answers(exporter), "the exporter outlived the evaluator"
        assert not folder.exists(), "the demo's folder outlived the evaluator"
    finally:
        if demo.poll() is None:
            demo.kill()
        demo.communicate(timeout=30)
