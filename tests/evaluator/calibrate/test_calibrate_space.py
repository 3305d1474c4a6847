"""What a calibration searches: the default space, and the weak layer's gate in it for a base
that reads the weak layer (rules/v4-ecc-weak.yaml) and not for one that does not."""

from __future__ import annotations

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.calibrate.space import candidates, parse_space, space_for
from gpu_health.evaluator.config.rules import load_ruleset
from tests.shared import REPO

V1 = REPO / "rules" / "v1-ecc-growth.yaml"
V4 = REPO / "rules" / "v4-ecc-weak.yaml"


def test_the_default_space_asks_about_the_gate_only_of_a_base_that_reads_the_weak_layer() -> None:
    space, default = parse_space([])
    v1, v4 = load_ruleset(V1, env={}), load_ruleset(V4, env={})
    assert space_for(v1, space, default) == space
    found = candidates(V4, v4, space_for(v4, space, default), default)
    assert len(candidates(V1, v1, space, default)) == 96 and len(found) == 192
    gates = {c.ruleset.params.weak_gate for c in found}
    assert gates == {"evidence", "require"}


def test_an_explicit_search_can_ask_about_the_gate_from_any_base() -> None:
    space, default = parse_space(["weak_gate=none,require", "min_increase=8"])
    assert space_for(load_ruleset(V4, env={}), space, default) == space
    found = candidates(V1, load_ruleset(V1, env={}), space, default)
    assert sorted(c.ruleset.params.weak_gate for c in found) == ["none", "require"]
    with pytest.raises(ConfigError, match="weak_gate: must be one of none, evidence, require"):
        parse_space(["weak_gate=sometimes"])
