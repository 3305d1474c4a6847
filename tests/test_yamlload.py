"""The bounded YAML loader every user-supplied file goes through (gpu_health/yamlload.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.file import load_config
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.webconfig import parse_web_config
from gpu_health.yamlload import MAX_EXPANDED_NODES, expanded_size, load_yaml
from tests.shared import alias_bomb

MERGE_BOMB = "\n".join(
    ["b0: &b0 {k0: 1, k1: 2, k2: 3, k3: 4}"]
    + [f"b{i}: &b{i} {{<<: [{', '.join([f'*b{i - 1}'] * 8)}], x{i}: {i}}}" for i in range(1, 10)]
) + "\n"


@pytest.mark.parametrize("text", [alias_bomb(), MERGE_BOMB, "a: &a [1, *a]\n"],
                         ids=["billion laughs", "merge keys", "recursive"])
def test_alias_bombs_are_refused_before_anything_is_built(text: str) -> None:
    with pytest.raises(yaml.YAMLError, match="refused"):
        load_yaml(text)


def test_anchors_used_a_reasonable_number_of_times_still_work() -> None:
    text = ("labels: &l {tenant: a, rack: r1}\n"
            "groups:\n" + "".join(f"  - {{targets: ['n{i}:10346'], labels: *l}}\n"
                                  for i in range(2000)))
    assert load_yaml(text) == yaml.safe_load(text)
    node = yaml.compose(text)
    assert node is not None and expanded_size(node) < MAX_EXPANDED_NODES


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(inner, max_size=5),
                     st.dictionaries(st.text(max_size=8), inner, max_size=5))


documents = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                         _nested, max_leaves=30)


@given(documents)
def test_without_aliases_it_is_safe_load(doc: Any) -> None:
    text = yaml.safe_dump(doc)
    assert load_yaml(text) == yaml.safe_load(text)


def test_every_file_we_read_uses_it(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("version: v1-bomb\n" + alias_bomb())
    with pytest.raises(ConfigError, match="alias bomb"):
        load_ruleset(bomb, env={})
    with pytest.raises(ConfigError, match="alias bomb"):
        load_config(bomb, {})
    with pytest.raises(ConfigError, match="alias bomb"):
        parse_web_config(alias_bomb() + "tls_server_config:\n  cert_file: *a9\n", tmp_path,
                         "web.yml")


def test_calibrate_refuses_a_bomb_in_one_line(tmp_path: Path) -> None:
    """``calibrate --rules`` with an alias bomb reached 3.6 GB and a MemoryError after 75 s."""
    bomb = tmp_path / "v1-bomb.yaml"
    bomb.write_text("version: v1-bomb\n" + alias_bomb() + "ratio: *a9\n")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "gpu-health-evaluator"), "calibrate", "--db",
         str(tmp_path / "x.duckdb"), "--rules", str(bomb)],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert "alias bomb" in result.stderr and "Traceback" not in result.stderr
