"""``gpu-health-evaluator demo --duration``: a short bounded run as CI does it (exporter with the
fake tools + evaluator on a fresh store), and that readings of the fake tools are stored as
simulated data, never as real data (not even in a store that holds real data)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evaluator.model import CardKey, Counters, Sample
from evaluator.store.engines.duckdb import DuckDBDatabase
from evaluator.store.samples import insert_samples
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
    evaluator = re.search(r"page       (http://127\.0\.0\.1:\d+)/ ", out)  # GET /
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
    from evaluator.demo import DEMO_NODE, _banner

    banner = _banner("http://127.0.0.1:9836", "http://127.0.0.1:9835", "the fake nvidia-smi",
                     Path("data/demo.duckdb"), 1, DEMO_NODE, "simulated")
    table = (REPO / "docs" / "demo.md").read_text(encoding="utf-8")
    urls = re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)
    assert len(urls) >= 9
    for url in urls:
        tail = url.removeprefix("...").removeprefix("http://127.0.0.1:9836")
        assert tail in banner, tail
    assert "every 60 s" in banner


def test_the_live_card_fails_within_minutes_and_the_demo_predicts_every_minute(
        tmp_path: Path) -> None:
    from evaluator.compose import build_service
    from evaluator.config.file import parse_config
    from evaluator.demo import ADVANCE_SECONDS, WORKER_SECONDS, FakeCard

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
    from evaluator.config.rules import load_ruleset
    from evaluator.demo import (
        ADVANCE_SECONDS,
        COLLECT_SECONDS,
        DEMO_NODE,
        FAKE_UUID,
        HISTORY_STEP,
        WORKER_SECONDS,
        FakeCard,
    )
    from evaluator.simulate.profiles import LIVE_DAILY, live_history
    from evaluator.simulate.writer import write_series
    from evaluator.worker import Worker

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
