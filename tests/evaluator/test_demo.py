"""``gpu-health-evaluator demo --duration``: a short bounded run as CI does it (exporter with the
fake tools + evaluator on a fresh store), and that readings of the fake tools are stored as
simulated data, never as real data (not even in a store that holds real data)."""

from __future__ import annotations

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
