"""The fault-event definition as a rule parameter: v2-ecc-xid, fault_xids validation, hashing
(v1's recorded hash must not move), effective versions under overrides, frozen definitions."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.file import RulesConfig
from gpu_health.evaluator.config.rules import DEFAULT_RULE_FILE, DEFAULT_VERSION, load_ruleset
from gpu_health.evaluator.rules.faults import MEMORY_XIDS, fault_events, fault_xids_from_json
from gpu_health.evaluator.rules.ruleset import parse_ruleset
from gpu_health.evaluator.store.predictions.rule_versions import register_ruleset
from tests.conftest import NewDb
from tests.evaluator.rules_support import V1_FILE, V2_FILE, insert_prediction, ruleset

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# The hash v1-ecc-growth was recorded with before fault_xids existed (stores in the field hold
# it): adding the parameter must not change it, or v1 could not start on those stores.
V1_HASH = "1fa9369f363db3691198042c6eea31abea9fe3bdb2d7433ebb64b517fb133f87"


def test_v2_is_v1_plus_memory_xids_and_the_default() -> None:
    v1, v2 = load_ruleset(V1_FILE, env={}), load_ruleset(V2_FILE, env={})
    assert (v2.version, v2.base_version) == ("v2-ecc-xid", "v2-ecc-xid")
    assert v2.params.fault_xids == MEMORY_XIDS == (48, 63, 64, 94, 95)
    assert v1.params.fault_xids == ()
    assert replace(v2.params, fault_xids=()) == v1.params  # same thresholds
    assert DEFAULT_RULE_FILE == V2_FILE and DEFAULT_VERSION == RulesConfig().active == v2.version
    assert load_ruleset(env={}).version == "v2-ecc-xid"


def test_v1_hash_is_unchanged_and_the_definition_is_hashed() -> None:
    v1, v2 = load_ruleset(V1_FILE, env={}), load_ruleset(V2_FILE, env={})
    assert v1.params_hash == V1_HASH
    assert "fault_xids" not in v1.params_json
    assert '"fault_xids":[48,63,64,94,95]' in v2.params_json
    assert v2.params_hash != V1_HASH


def test_overriding_fault_xids_forks_the_effective_version() -> None:
    v1_xid = ruleset(V1_FILE, fault_xids=[48])
    assert re.fullmatch(r"v1-ecc-growth\+p[0-9a-f]{5}", v1_xid.version)
    assert v1_xid.params.fault_xids == (48,) and v1_xid.overrides == (("fault_xids", (48,)),)
    ecc_only = ruleset(V2_FILE, fault_xids="")  # empty: ECC-only
    assert re.fullmatch(r"v2-ecc-xid\+p[0-9a-f]{5}", ecc_only.version)
    assert ecc_only.params.fault_xids == ()
    # same set, other order and spelling: same parameters, same version
    assert ruleset(V2_FILE, fault_xids="[95, 94,64,63 ,48]").version == "v2-ecc-xid"
    assert ruleset(V2_FILE, fault_xids="48,48,94").version == \
        ruleset(V2_FILE, fault_xids="94,48").version


@pytest.mark.parametrize("value", ["79", "13,48", "48,x", "-1", "48.0"])
def test_invalid_override_keeps_the_file_value(value: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        rs = ruleset(V2_FILE, fault_xids=value)
    assert rs.version == "v2-ecc-xid" and rs.params.fault_xids == MEMORY_XIDS
    assert len(rs.warnings) == 1 and "fault_xids" in rs.warnings[0]


def test_non_memory_xids_are_refused_in_a_file_with_the_reason() -> None:
    text = V2_FILE.read_text().replace("fault_xids: [48, 63, 64, 94, 95]",
                                       "fault_xids: [48, 13, 79]")
    with pytest.raises(ConfigError) as err:
        parse_ruleset(text, env={}, origin="rules/bad.yaml")
    assert "only memory-related XIDs (48, 63, 64, 94, 95)" in str(err.value)
    assert "got 13, 79" in str(err.value)


@pytest.mark.parametrize("value", ["48", "[true]", "['48']", "{a: 1}"])
def test_fault_xids_must_be_a_list_of_whole_numbers(value: str) -> None:
    text = V2_FILE.read_text().replace("[48, 63, 64, 94, 95]", value)
    with pytest.raises(ConfigError, match="fault_xids: must be a list of whole numbers"):
        parse_ruleset(text, env={})


def test_empty_list_in_a_file_is_ecc_only_with_the_v1_hash(tmp_path: Path) -> None:
    text = V1_FILE.read_text() + "fault_xids: []\n"
    assert parse_ruleset(text, env={}).params_hash == V1_HASH


def test_frozen_definition_from_the_stored_parameters(tmp_path: Path) -> None:
    assert fault_xids_from_json(load_ruleset(V2_FILE, env={}).params_json) == MEMORY_XIDS
    assert fault_xids_from_json(load_ruleset(V1_FILE, env={}).params_json) == ()
    for unreadable in (None, "", "not json", "[1]", '{"fault_xids": "48"}'):
        assert fault_xids_from_json(unreadable) == ()
    assert fault_xids_from_json('{"fault_xids": [95, 13, 48]}') == (48, 95)
    assert fault_events(()) == ["ecc_uncorrected"]
    assert fault_events((95, 48)) == ["ecc_uncorrected", "xid:48", "xid:95"]


def test_v1_and_v2_register_side_by_side_and_v1_stays_loadable(new_db: NewDb) -> None:
    db = new_db()
    # a store whose v1 record predates fault_xids (the hash above) and has v1 history
    db.execute("INSERT INTO gpu_health_rule_versions VALUES ('v1-ecc-growth', 'v1-ecc-growth', "
               "$hash, $params, $now)", {"hash": V1_HASH,
                                         "params": load_ruleset(V1_FILE, env={}).params_json,
                                         "now": NOW.replace(tzinfo=None)})
    insert_prediction(db, pid="p", node="n1", gpu=0, uuid="GPU-a", t0=NOW)
    register_ruleset(db, load_ruleset(V1_FILE, env={}), NOW)  # no RuleError
    register_ruleset(db, load_ruleset(V2_FILE, env={}), NOW)
    rows = db.fetchall("SELECT version, params_hash FROM gpu_health_rule_versions ORDER BY 1")
    assert [r[0] for r in rows] == ["v1-ecc-growth", "v2-ecc-xid"] and rows[0][1] == V1_HASH
    db.close()
