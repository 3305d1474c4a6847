"""Config sections declared as tables (evaluator/setting_tables.py): each dataclass takes its
defaults from its table, each key is documented, and reading by kind keeps the Checker's
messages and lists every problem."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.alerting import ALERTING, AlertingConfig
from gpu_health.evaluator.config.api import API, ApiConfig
from gpu_health.evaluator.config.discovery import FILE_SD, HTTP_SD, FileSDConfig, HttpSDConfig
from gpu_health.evaluator.config.file import TOP_KEYS, Config, parse_config
from gpu_health.evaluator.config.remediation import SLURM, SlurmRemediation
from gpu_health.evaluator.config.rules import RULES, RulesConfig
from gpu_health.evaluator.config.scrape import SCRAPE, ScrapeConfig
from gpu_health.evaluator.config.source import (
    INGEST,
    PROMETHEUS,
    IngestConfig,
    PrometheusSourceConfig,
)
from gpu_health.evaluator.config.storage import HA, STORAGE, HaConfig, PostgresConfig, StorageConfig
from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.config.web import WEB, ListenerConfig
from gpu_health.evaluator.config.writes import DEDUP, KEEPALIVE, DedupConfig
from gpu_health.evaluator.setting_tables import Setting, Table

DOCS = Path(__file__).resolve().parents[3] / "docs"
# Each table and the dataclass its values land in (fields named like the keys).
BUILT: list[tuple[Table, type]] = [
    (ALERTING, AlertingConfig), (API, ApiConfig), (FILE_SD, FileSDConfig),
    (HTTP_SD, HttpSDConfig), (RULES, RulesConfig), (SLURM, SlurmRemediation),
    (SCRAPE, ScrapeConfig), (INGEST, IngestConfig), (PROMETHEUS, PrometheusSourceConfig),
    (STORAGE, PostgresConfig), (STORAGE, StorageConfig), (HA, HaConfig), (DEDUP, DedupConfig),
    (WEB, ListenerConfig),
]
TABLES = [table for table, _ in BUILT] + [KEEPALIVE]


@pytest.mark.parametrize(("table", "cls"), BUILT, ids=[t.where for t, _ in BUILT])
def test_each_dataclass_default_is_its_tables(table: Table, cls: type) -> None:
    fields = [f for f in dataclasses.fields(cls) if f.name in table.keys]
    assert fields, f"{cls.__name__} shares no field with {table.where}"
    for f in fields:
        required = f.default is dataclasses.MISSING  # the table says None
        assert (None if required else f.default) == table.defaults[f.name], \
            f"{cls.__name__}.{f.name}"


@pytest.mark.parametrize("table", TABLES, ids=[t.where or "top" for t in TABLES])
def test_every_key_is_documented(table: Table) -> None:
    """Each key is named in docs/ as YAML (``key:``), code (`` `key` ``) or a dotted path."""
    docs = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    missing = [k for k in table.keys
               if not re.search(rf"(^|\s){k}:|`{k}`|\.{k}\b", docs, re.M)]
    assert missing == []


def test_an_empty_section_reads_as_the_defaults() -> None:
    c = Checker()
    assert ScrapeConfig(**SCRAPE.read(c, {}), timeout=10.0) == ScrapeConfig()
    assert c.problems == []


def test_bad_values_keep_the_default_and_every_problem_is_listed() -> None:
    c = Checker()
    values = API.read(c, {"max_concurrency": 0, "max_queue": "many", "timeout": "soon"},
                      skip=("tokens_file",))
    assert values == {k: v for k, v in API.defaults.items() if k != "tokens_file"}
    assert c.problems == [
        "api.max_concurrency must be a whole number in 1..64, got 0",
        "api.max_queue must be a whole number in 0..100000, got 'many'",
        "api.timeout must be a positive duration like 60, \"60s\", \"5m\" or \"1h30m\", "
        "got 'soon'",
    ]


def test_a_list_item_is_named_by_its_index() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"http_sd_configs": [{"url": "http://sd:8080/t"},
                                          {"url": "http://sd:8080/u", "refresh_interval": -1}]},
                     base=Path())
    assert list(err.value.problems) == [
        "http_sd_configs[1].refresh_interval must be a positive duration like 60, \"60s\", "
        "\"5m\" or \"1h30m\", got -1"]


def test_a_table_refuses_a_key_twice_and_bounds_on_other_kinds() -> None:
    with pytest.raises(ValueError, match="twice"):
        Table("x", (Setting("a", "bool", True), Setting("a", "bool", False)))
    with pytest.raises(ValueError, match="kind int"):
        Setting("a", "duration", 1.0, 0, 10)
    with pytest.raises(ValueError, match="kind int"):
        Setting("a", "int", 1)


@given(st.dictionaries(st.sampled_from(SLURM.keys), st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True),
    st.text(max_size=8), st.lists(st.integers(), max_size=2))))
def test_reading_never_raises_and_always_gives_every_plain_key(raw: dict[str, Any]) -> None:
    c = Checker()
    values = SLURM.read(c, raw)
    assert set(values) == {s.key for s in SLURM.settings if s.kind != "custom"}


def test_the_config_object_has_one_field_per_top_level_key() -> None:
    """``config.storage.path``, ``config.web.listen_address``, ``config.api.tokens_file``: each
    section of the file is one field holding its own dataclass, never flattened into the top
    (before: ``storage_path``, ``listen_host``, ``web_external_url``, ``api_tokens_file``...).
    Beyond the file: the retention from the environment, the file's path, the demo's label."""
    names = [f.name for f in dataclasses.fields(Config)]
    file_keys = [k for k in TOP_KEYS if k != "keepalive_seconds"]  # keepalive's old name
    assert names == [*file_keys, "retention_days", "source", "ingest_source"]
