"""The rule files: where they live, and reading one into a :class:`RuleSet`.

``rules.dir`` (default: the rule sets packaged with the program, :data:`gpu_health.resources.RULES`)
holds one ``<version>.yaml`` per rule set; ``rules.active`` names the one the worker runs. The
parsing and the override semantics are pure and live in :mod:`gpu_health.evaluator.rules.ruleset`;
this module only reads the file and checks that its name matches its ``version:`` (DESIGN.md), so
the file an operator looks at is the file that runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from gpu_health import resources
from gpu_health.errors import ConfigError
from gpu_health.evaluator.rules.actions import ActionPolicy, parse_policy
from gpu_health.evaluator.rules.ruleset import RuleSet, parse_ruleset

RULES_DIR: Final = resources.RULES  # the packaged rule sets (a config may point elsewhere)
DEFAULT_VERSION: Final = "v2-ecc-xid"  # the default ``rules.active``
DEFAULT_RULE_FILE: Final = RULES_DIR / f"{DEFAULT_VERSION}.yaml"
ACTION_POLICY_VERSION: Final = "nvidia-memory-v2"
BASELINE_NAMES: Final = ("baseline-new-correctable", "baseline-repeat")


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
