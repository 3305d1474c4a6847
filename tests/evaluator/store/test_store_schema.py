"""The store opens, migrates once, and reads NULL counters back as None (never 0)."""

from __future__ import annotations

from datetime import UTC, datetime

from gpu_health.clock import to_naive_utc
from tests.conftest import NewDb


def test_migrations_apply_once(new_db: NewDb) -> None:
    db = new_db("a")
    assert db.migrate() == []
    db.close()
    db = new_db("a")
    versions = [r[0] for r in db.fetchall("SELECT version FROM schema_migrations ORDER BY 1")]
    assert versions == sorted(versions) and versions[0] == 1
    db.close()


def test_null_counters_read_back_as_none(new_db: NewDb) -> None:
    db = new_db("n")
    at = to_naive_utc(datetime(2026, 1, 1, tzinfo=UTC))
    db.execute(
        "INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, sampled_at) "
        "VALUES ('n1', 0, NULL, 'real', $at)",
        {"at": at},
    )
    row = db.fetchone(
        "SELECT ecc_uncorrected_total, ecc_corrected_total, retired_pages, "
        "remapped_rows_pending, remapped_rows_failure FROM gpu_health_samples"
    )
    assert row == (None, None, None, None, None)
    defaults = db.fetchall(
        "SELECT column_name, column_default FROM information_schema.columns "
        "WHERE table_name = 'gpu_health_samples' AND column_default IS NOT NULL"
    )
    assert defaults == []
    db.close()


def test_bulk_insert_and_batched_latest(new_db: NewDb) -> None:
    from gpu_health.evaluator.model import CardKey, Counters, Sample
    from gpu_health.evaluator.store.readings.samples import insert_samples, latest_rows

    db = new_db("s")
    t1 = datetime(2026, 1, 1, tzinfo=UTC)
    t2 = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    a, b = CardKey("n1", 0), CardKey("n1", 1)
    rows = [
        Sample(a, "GPU-a", t1, Counters(ecc_corrected_total=1)),
        Sample(a, "GPU-a", t2, Counters(ecc_corrected_total=2)),
        Sample(b, None, t1, Counters()),
    ]
    before = db.statements
    assert insert_samples(db, rows) == 3
    latest = latest_rows(db, [a, b, CardKey("n2", 0)])
    # PostgreSQL: the insert holds the watermark (LOCK) and reads it in its transaction
    assert db.statements - before == (2 if db.engine == "duckdb" else 4)
    assert latest[a].sampled_at == t2 and latest[a].counters.ecc_corrected_total == 2
    assert latest[b].counters == Counters() and latest[b].gpu_uuid is None
    assert CardKey("n2", 0) not in latest
    db.close()
