"""The ``rules`` section and the rule files: where they live, and reading one into a
:class:`RuleSet`.

``rules.dir`` (default: the rule sets packaged with the program, :data:`gpu_health.resources.RULES`)
holds one ``<version>.yaml`` per rule set; ``rules.active`` names the one the worker runs. The
parsing and the override semantics are pure and live in :mod:`gpu_health.evaluator.rules.ruleset`;
this module only reads the file and checks that its name matches its ``version:`` (DESIGN.md), so
the file an operator looks at is the file that runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpu_health import resources
from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.rules.actions import ActionPolicy, parse_policy
from gpu_health.evaluator.rules.ruleset import RuleSet, parse_ruleset
from gpu_health.evaluator.setting_tables import Setting, Table

RULES_DIR: Final = resources.RULES  # the packaged rule sets (a config may point elsewhere)
DEFAULT_VERSION: Final = "v2-ecc-xid"  # the default ``rules.active``
DEFAULT_RULE_FILE: Final = RULES_DIR / f"{DEFAULT_VERSION}.yaml"
ACTION_POLICY_VERSION: Final = "nvidia-memory-v2"
BASELINE_NAMES: Final = ("baseline-new-correctable", "baseline-repeat")
# Shadow versions run live beside the active one, each a whole prediction pass per tick (50 took
# a 1,600-card tick from 0.63 s to 19.8 s): a few are for comparing, not for a search.
MAX_SHADOW: Final = 8
_VERSION_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
RULES: Final = Table("rules", (
    Setting("dir", "custom", RULES_DIR),  # relative to the config file
    Setting("active", "custom", DEFAULT_VERSION),  # a rule version name
    Setting("shadow", "custom", ()),  # run beside the active one, never alerted
))


@dataclass(frozen=True, slots=True)
class RulesConfig:
    """The ``rules`` section: where the rule files are, which one runs, which run beside it."""

    dir: Path = RULES.defaults["dir"]
    active: str = RULES.defaults["active"]
    shadow: tuple[Path, ...] = RULES.defaults["shadow"]  # docs/calibration.md


def parse_rules(c: Checker, raw: Mapping[str, Any], base: Path) -> RulesConfig:
    """The ``rules`` section (paths relative to the config file's folder ``base``)."""
    section = c.section(raw, "rules", RULES.keys)
    active = c.string(section, "active", "rules.active", RULES.defaults["active"])
    if _VERSION_RE.fullmatch(active) is None:
        c.problem(f"rules.active: {active!r} is not a rule version name")
    text = c.optional_string(section, "dir", "rules.dir")
    shadow = tuple(base / s for s in c.string_list(section, "shadow", "rules.shadow"))
    if len(shadow) > MAX_SHADOW:
        c.problem(f"rules.shadow: {len(shadow)} versions; at most {MAX_SHADOW} (each is a "
                  "whole extra prediction pass on every tick)")
    return RulesConfig(RULES.defaults["dir"] if text is None else base / text, active, shadow)


def action_policy_file(rules_dir: Path = RULES_DIR) -> Path:
    """The shipped recommended-action policy under ``rules.dir`` (the packaged one unless the
    config's rules.dir names another folder)."""
    return rules_dir / "actions" / f"{ACTION_POLICY_VERSION}.yaml"


def baseline_files(rules_dir: Path = RULES_DIR) -> tuple[Path, ...]:
    """The yardsticks the backtest replays beside every version (never run live)."""
    return tuple(rules_dir / "baselines" / f"{name}.yaml" for name in BASELINE_NAMES)


DEFAULT_ACTION_POLICY: Final = action_policy_file()
BASELINE_FILES: Final = baseline_files()


def load_ruleset(path: str | Path = DEFAULT_RULE_FILE, *, env: Mapping[str, str]) -> RuleSet:
    """Read ``rules/<version>.yaml`` and apply overrides from ``env`` (the environment
    ``gpu_health.evaluator.main`` read once)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"rule file {file}: cannot read: {exc}") from exc
    ruleset = parse_ruleset(text, env=env, origin=str(file))
    if file.suffix not in (".yaml", ".yml") or file.stem != ruleset.base_version:
        raise ConfigError(f"rule file {file}: must be named {ruleset.base_version}.yaml after "
                          f"its version ({ruleset.base_version!r})")
    return ruleset


def load_action_policy(path: str | Path = DEFAULT_ACTION_POLICY) -> ActionPolicy:
    """Read and validate a recommended-action policy (docs/actions.md)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"action policy {file}: cannot read: {exc}") from exc
    policy = parse_policy(text, str(file))
    if file.stem != policy.version:
        raise ConfigError(f"action policy {file}: must be named {policy.version}.yaml after "
                          "its version")
    return policy
