"""The evaluator's command-line conventions of a Prometheus component: ``--version``,
``--log.level`` / ``--log.format`` on every subcommand (the old ``--log-level`` accepted and
warned), and ``process_*`` / ``python_info`` on its public ``/metrics``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_health import __version__
from gpu_health.evaluator.cli import COMMANDS, parse_args
from tests.conftest import NewDb
from tests.shared import REPO


def evaluator(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "gpu-health-evaluator"  # the installed entry point
    return subprocess.run([str(script), *args], cwd=REPO, input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)


def test_version_prints_and_exits_0() -> None:
    result = evaluator("--version")
    assert result.returncode == 0
    assert result.stdout.startswith(f"gpu-health-evaluator, version {__version__} (python 3.")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_takes_the_log_flags(command: str) -> None:
    required = ["--evaluator", "http://127.0.0.1:10347"] if command == "check" else []
    args = parse_args([command, *required, "--log.level", "WARN", "--log.format", "json"])
    assert (args.log_level, args.log_format, args.deprecated_flags) == ("WARN", "json", [])


def test_json_logs_and_the_old_flag_warned() -> None:
    result = evaluator("tokens-hash", "--log-level", "DEBUG", "--log.format", "json",
                       stdin="a-token")
    assert result.returncode == 0 and len(result.stdout.strip()) == 64
    [line] = [json.loads(x) for x in result.stderr.splitlines()]
    assert line["level"] == "warn" and "--log-level is deprecated" in line["msg"]


def test_a_bad_level_or_format_exits_2() -> None:
    assert evaluator("tokens-hash", "--log.level", "loud").returncode == 2
    assert evaluator("tokens-hash", "--log.format", "xml").returncode == 2


@pytest.mark.parametrize("command", ["simulate", "compact"])
def test_duckdb_only_commands_refuse_a_postgresql_config(command: str, tmp_path: Path) -> None:
    """Before: with storage.url they used the default DuckDB file without a word."""
    config = tmp_path / "pg.yml"
    config.write_text("storage:\n  url: postgresql://gpuhealth@db.invalid:5432/gpuhealth\n")
    result = evaluator(command, "--config", str(config))
    assert result.returncode == 2
    assert f"{command} works on a DuckDB file and this config's store is PostgreSQL" \
        in result.stderr


def test_the_ready_line_names_the_store_in_use(new_db: NewDb) -> None:
    """Before: a PostgreSQL evaluator's ready line named data/gpu-health.duckdb."""
    from gpu_health.evaluator.compose.readings import storage_text

    db = new_db()
    text = storage_text(db)
    if db.engine == "duckdb":
        assert text.startswith("duckdb ") and text.endswith("store.duckdb")
    else:
        assert text.startswith("postgresql 127.0.0.1:") and "duckdb" not in text
