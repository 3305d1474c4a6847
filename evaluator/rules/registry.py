"""Start-up registration of a rule set's effective version (frozen history, DESIGN.md).

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
from datetime import datetime
from typing import Any

from evaluator.rules.ruleset import RuleSet
from evaluator.store.db import Database
from evaluator.store.predictions import register_rule_version, reregister_unused_rule_version
from gpu_health.errors import RuleError

log = logging.getLogger(__name__)


def params_diff(stored: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences, one entry per key, sorted by key."""
    return [
        f"{key}: stored {stored.get(key, '(absent)')!r}, now {new.get(key, '(absent)')!r}"
        for key in sorted(set(stored) | set(new))
        if stored.get(key) != new.get(key)
    ]


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
