"""The storage and ha sections: DuckDB stays the default, a postgresql:// url with
its password read from a file (never in a repr or the URL), every problem listed at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.compose import open_store
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.config.storage import DEFAULT_STORAGE


def test_duckdb_stays_the_default_and_url_may_be_a_path(tmp_path: Path) -> None:
    assert parse_config({}, base=tmp_path).storage.postgres is None
    assert parse_config({}, base=tmp_path).storage.path == DEFAULT_STORAGE
    config = parse_config({"storage": {"url": "data/x.duckdb"}}, base=tmp_path)
    assert config.storage.path == tmp_path / "data/x.duckdb" and config.storage.postgres is None


def test_postgresql_url_with_a_password_file_and_ha(tmp_path: Path) -> None:
    (tmp_path / "pg").write_text("pg-s3cret\n")
    config = parse_config({
        "storage": {"url": "postgresql://gpuhealth@db:5432/gpuhealth", "password_file": "pg",
                    "connect_timeout": "5s", "statement_timeout": "2m"},
        "ha": {"lease_ttl": "10s", "member_id": "eval-a"}}, base=tmp_path)
    pg = config.storage.postgres
    assert pg is not None and pg.password == "pg-s3cret"
    assert (pg.connect_timeout, pg.statement_timeout) == (5, 120)
    assert (config.ha.lease_ttl, config.ha.member_id) == (10, "eval-a")
    assert "s3cret" not in repr(pg) and "s3cret" not in repr(config)


def test_every_storage_problem_is_listed_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({
            "storage": {"url": "postgresql://u:inline-secret@/db", "path": "x.duckdb",
                        "password_file": "missing"},
            "ha": {"lease_ttl": "1s"},
            "ingest": {"source": "prometheus", "prometheus": {"url": "http://p:9090",
                                                              "history": "30d"}},
        }, base=tmp_path)
    text = str(err.value)
    for expected in ("path or url", "password must not be in the URL", "needs a host",
                     "storage.password_file", "ha.lease_ttl", "ingest.prometheus.history"):
        assert expected in text, expected
    assert "inline-secret" not in text


def test_postgresql_with_the_prometheus_source_is_accepted(tmp_path: Path) -> None:
    """Several evaluators share one Prometheus source: only the leader reads (docs/ha.md)."""
    config = parse_config({"storage": {"url": "postgresql://u@db.example/gpuhealth"},
                           "ingest": {"source": "prometheus",
                                      "prometheus": {"url": "http://p:9090"}}}, base=tmp_path)
    assert config.storage.postgres is not None and config.ingest.source == "prometheus"


def test_ha_without_a_shared_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="shared store"):
        parse_config({"ha": {"lease_ttl": "15s"}}, base=tmp_path)


def test_duckdb_memory_limit_reaches_the_file_and_is_checked(tmp_path: Path) -> None:
    """Before: storage.memory_limit bounds DuckDB's memory (the rest spills to <file>.tmp);
    without it DuckDB's own default stands."""
    config = parse_config({"storage": {"path": "s.duckdb", "memory_limit": "512MiB"}},
                          base=tmp_path)
    assert config.storage.memory_limit == 512 * 2**20
    db = open_store(config, "test")
    try:
        assert db.fetchone("SELECT current_setting('memory_limit'), "
                           "current_setting('temp_directory')") == (
            "512.0 MiB", str(tmp_path / "s.duckdb.tmp"))
    finally:
        db.close()
    assert parse_config({}, base=tmp_path).storage.memory_limit is None
    with pytest.raises(ConfigError) as err:
        parse_config({"storage": {"memory_limit": "1MiB"}}, base=tmp_path)
    assert list(err.value.problems) == ["storage.memory_limit must be at least 64MiB, got '1MiB'"]
    with pytest.raises(ConfigError) as err:
        parse_config({"storage": {"url": "postgresql://u@db/g", "memory_limit": "1GiB"}},
                     base=tmp_path)
    assert list(err.value.problems) == [
        "storage.memory_limit applies to a DuckDB file only (PostgreSQL: the server's own "
        "settings)"]
