"""``gpu-health-evaluator compact``: a file upgraded in place gives its freed space back.

The file is written as the previous release did (migrations 1-4, the samples' ART index filled
by 300,000 rows); opening it runs migration 5 (index dropped, rollups), compact rewrites it.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from gpu_health.clock import to_naive_utc
from gpu_health.evaluator.main import main
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.migrations import MIGRATIONS
from gpu_health.evaluator.store.readings.rollups import seal
from gpu_health.evaluator.store.statistics.api_queries import capabilities
from gpu_health.evaluator.store.statistics.stats_queries import raw_stats
from tests.evaluator.rules_support import at
from tests.evaluator.store_support import older_file

NOW = at(10)


def _older_store(path: Path) -> None:
    with older_file(path, 4) as con:
        con.execute(
            "INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, sampled_at, "
            "ecc_uncorrected_total, ecc_corrected_total) "
            "SELECT 'node-' || (i % 300), 0, 'GPU-' || (i % 300), 'real', "
            "$start + to_seconds((i // 300) * 300), (i // 250000), i // 3000 "
            "FROM range(300000) r(i)", {"start": to_naive_utc(at(0))})


def _answers(db: Database) -> tuple[object, ...]:
    return (raw_stats(db, since=at(0), until=NOW, source="real", nodes=None),
            capabilities(db, source="real", now=NOW))


def test_compact_returns_the_space_and_keeps_every_answer(tmp_path: Path,
                                                          capsys: object) -> None:
    path = tmp_path / "gpu-health.duckdb"
    _older_store(path)
    db = DuckDBDatabase(path)  # migration 5: the index is dropped, its blocks stay in the file
    seal(db, NOW + timedelta(days=1))
    reference = _answers(db)
    db.close()
    before = path.stat().st_size
    assert main(["compact", "--storage", str(path)]) == 0
    after = path.stat().st_size
    assert after < before / 3, (before, after)
    db = DuckDBDatabase(path)
    assert _answers(db) == reference
    assert [r[0] for r in db.fetchall("SELECT version FROM schema_migrations ORDER BY 1")] == \
        [m[0] for m in MIGRATIONS]
    indexes = {r[0] for r in db.fetchall("SELECT index_name FROM duckdb_indexes()")}
    assert {"idx_predictions_card", "idx_predictions_status"} <= indexes
    db.close()
    assert not (tmp_path / "gpu-health.duckdb.compact").exists()


def test_compact_refuses_a_file_in_use(tmp_path: Path) -> None:
    path = tmp_path / "busy.duckdb"
    db = DuckDBDatabase(path)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from gpu_health.evaluator.main import main; "
         "sys.exit(main(['compact', '--storage', sys.argv[1]]))", str(path)],
        capture_output=True, text=True, timeout=120, check=False)
    db.close()
    assert done.returncode == 1
    assert "stop the evaluator first" in done.stderr
    assert path.exists() and not (tmp_path / "busy.duckdb.compact").exists()


def test_compact_of_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    assert main(["compact", "--storage", str(tmp_path / "none.duckdb")]) == 1
