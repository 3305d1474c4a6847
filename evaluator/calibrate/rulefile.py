"""The calibrated version as a rule file of its own: ``DIR/<base>-cal-<hash>.yaml``.

A new version, never an edit of the base and never written over an existing file: predictions
are frozen per version, so a changed threshold must be a new name. Every parameter is written
out (nothing inherited from a default that might change), under a comment header that says
what data it was tuned on, how the period was split, the objective, and the train and test
numbers with their intervals. The file loads like any shipped rule (``run`` as ``rules.active``
or in ``rules.shadow``, ``backtest --rules``); the writer checks that it reads back as exactly
the chosen parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpu_health.errors import ConfigError, OutputError
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.rules.params import KEYS
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.files import write_file


def calibrated_version(chosen: RuleSet) -> str:
    return f"{chosen.base_version}-cal-{chosen.params_hash[:6]}"


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return repr(value) if isinstance(value, float) else str(value)


def rule_text(chosen: RuleSet, header: Sequence[str]) -> str:
    values = chosen.params.as_dict()
    lines = [f"# {line}".rstrip() for line in header]
    lines.append(f"version: {calibrated_version(chosen)}")
    lines += [f"{key}: {_yaml(values[key])}" for key in KEYS]
    return "\n".join(lines) + "\n"


def write_rule(directory: Path, chosen: RuleSet, header: Sequence[str]) -> Path:
    """Write the file (refusing to overwrite a different one); returns its path."""
    path = directory / f"{calibrated_version(chosen)}.yaml"
    text = rule_text(chosen, header)
    if path.exists():
        existing = load_ruleset(path, env={})
        if existing.params_hash != chosen.params_hash:
            raise ConfigError(f"--write-rule: {path} exists with other parameters; not "
                              "overwritten")
        return path  # the same version was written before: nothing to do
    try:
        write_file(path, text, replace=False)
    except FileExistsError:
        raise OutputError(f"--write-rule: {path} appeared while it was written; not "
                          "overwritten") from None
    written = load_ruleset(path, env={})
    if written.params_hash != chosen.params_hash:  # a writer bug must not ship a wrong rule
        path.unlink()
        raise ConfigError(f"--write-rule: {path} did not read back as the chosen parameters")
    return path
