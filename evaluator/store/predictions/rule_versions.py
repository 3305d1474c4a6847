"""Start-up registration of a rule set's effective version (frozen history, DESIGN.md): the
table ``gpu_health_rule_versions`` and the policy built on it.

The first use of a version records its parameter hash and parameters. Starting again with the
same version name but different frozen parameters (the YAML file was edited in place) is refused
with a :class:`~gpu_health.errors.RuleError` naming every changed parameter once the version has
produced predictions: those were made under the old parameters, and mixing the two would let
history be "tuned" after the fact. While no prediction carries the version yet, there is no
history to protect: the new parameters replace the record, with a warning.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime

from gpu_health.errors import RuleError
from gpu_health.evaluator.rules.ruleset import RuleSet, params_diff
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.predictions.records import run_idempotent

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredRuleVersion:
    version: str
    base_version: str
    params_hash: str
    params_json: str
    first_used_at: datetime


def register_rule_version(db: Database, *, version: str, base_version: str, params_hash: str,
                          params_json: str, now: datetime) -> StoredRuleVersion:
    """Record a version on first use (first writer wins); return what the store holds."""
    run_idempotent(
        db,
        "INSERT INTO gpu_health_rule_versions VALUES ($version, $base_version, $params_hash, "
        "$params_json, $now) ON CONFLICT DO NOTHING",
        {"version": version, "base_version": base_version, "params_hash": params_hash,
         "params_json": params_json, "now": now},
    )
    row = db.fetchone(
        "SELECT version, base_version, params_hash, params_json, first_used_at "
        "FROM gpu_health_rule_versions WHERE version = $version", {"version": version},
    )
    return StoredRuleVersion(str(row[0]), str(row[1]), str(row[2]), str(row[3]),
                             row[4])


def reregister_unused_rule_version(db: Database, *, version: str, params_hash: str,
                                   params_json: str, now: datetime) -> bool:
    """Replace a version's recorded parameters, but only while no prediction carries the version
    (check and update in one statement, on one snapshot)."""
    rows = run_idempotent(
        db,
        """UPDATE gpu_health_rule_versions
        SET params_hash = $hash, params_json = $json, first_used_at = $now
        WHERE version = $version AND NOT EXISTS (
            SELECT 1 FROM gpu_health_predictions WHERE rule_version = $version)
        RETURNING version""",
        {"version": version, "hash": params_hash, "json": params_json, "now": now},
    )
    return bool(rows)


def register_ruleset(db: Database, ruleset: RuleSet, now: datetime) -> None:
    """Record the version on first use; raise RuleError if it exists with other parameters."""
    stored = register_rule_version(
        db, version=ruleset.version, base_version=ruleset.base_version,
        params_hash=ruleset.params_hash, params_json=ruleset.params_json, now=now,
    )
    if stored.params_hash == ruleset.params_hash:
        log.info("rule set %s registered (params %s, first used %s)", ruleset.version,
                 ruleset.params_hash[:12], stored.first_used_at.isoformat())
        return
    try:
        old = json.loads(stored.params_json)
    except ValueError:
        old = {}
    diff = params_diff(old, json.loads(ruleset.params_json)) or ["(hash differs)"]
    if reregister_unused_rule_version(db, version=ruleset.version,
                                      params_hash=ruleset.params_hash,
                                      params_json=ruleset.params_json, now=now):
        log.warning("rule version %s changed before it produced any prediction; re-registered "
                    "with the new parameters: %s", ruleset.version, "; ".join(diff))
        return
    raise RuleError(
        f"rule version {ruleset.version!r} from {ruleset.origin} already has predictions made "
        f"with different parameters (first used {stored.first_used_at.isoformat()}): "
        f"{'; '.join(diff)}. A rule file is immutable once used: restore it, or save the new "
        "thresholds under a new version name.",
        reason="rule_version_changed",
    )
