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
from datetime import UTC, datetime
from pathlib import Path

from evaluator.model import CardKey, Counters, Sample
from evaluator.store import Database
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
    evaluator = re.search(r"evaluator  (http://127\.0\.0\.1:\d+)/metrics", out)
    assert exporter and evaluator, out
    assert "predictions?source=simulated" in out and "awaiting calibration" in out
    for url in (exporter.group(1), evaluator.group(1)):  # both are gone after the run
        try:
            urllib.request.urlopen(url + "/metrics", timeout=2)
        except OSError:
            continue
        raise AssertionError(f"{url} still answers after the demo ended")
    db = Database(tmp_path / "demo.duckdb", read_only=True)
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
    db = Database(store)
    insert_samples(db, [Sample(CardKey("gpu-prod-07", 0), "GPU-1", datetime.now(UTC),
                               Counters(ecc_corrected_total=3))])
    db.close()
    result = run_demo(tmp_path, "--duration", "4", "--storage", str(store))
    assert result.returncode == 0, result.stdout + result.stderr
    db = Database(store, read_only=True)
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
