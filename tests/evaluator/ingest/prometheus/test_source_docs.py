"""docs/prometheus-source.md's "complete minimal file" loads with the evaluator's own config
loader and means what its comments say (the defaults it names are the loader's defaults)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from gpu_health.evaluator.config.file import load_config
from gpu_health.evaluator.http.api.auth import hash_token
from tests.shared import REPO


def minimal_block() -> str:
    text = (REPO / "docs" / "prometheus-source.md").read_text()
    section = text.split("## A complete minimal file", 1)[1]
    found = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert found is not None
    return found.group(1)


def test_the_minimal_file_loads_with_the_defaults_it_names(tmp_path: Path) -> None:
    (tmp_path / "tokens.yml").write_text(yaml.safe_dump({"tokens": [{
        "name": "ops", "sha256": hash_token("t"), "scopes": ["nodes:read"], "tenants": ["*"]}]}))
    path = tmp_path / "evaluator.yml"
    path.write_text(minimal_block())
    config = load_config(path, {})
    source = config.ingest.prometheus
    assert config.ingest.source == "prometheus" and source is not None
    assert (source.url, source.metrics, source.step) == ("http://prometheus:9090", "dcgm", 15.0)
    assert (source.lag, source.max_catchup, source.history, source.timeout) == (
        120.0, 3600.0, None, 30.0)
    assert config.storage.path == Path("/var/lib/gpu-health/gpu-health.duckdb")
    assert config.web.listen_address == "0.0.0.0:10347"
    assert config.api.tokens_file == tmp_path / "tokens.yml"
    assert config.alertmanagers == ("http://alertmanager:9093",)
    defaults = load_config(None, {})
    assert str(defaults.storage.path) == "data/gpu-health.duckdb"
    assert defaults.web.listen_address == "127.0.0.1:10347"
