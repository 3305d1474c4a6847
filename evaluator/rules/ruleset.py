"""A rule set from the text of ``rules/<version>.yaml`` plus ``GPU_HEALTH_RULE_<KEY>`` overrides.

The file is the reviewed source of truth, so a bad file fails fast with every problem listed
(:class:`~gpu_health.errors.ConfigError`). An environment override is an operator's tweak: an
invalid one is ignored with a warning and the file's value stays (a typo must never turn into
"rule silently off" or "fires on everything"). Any accepted override that changes a frozen
parameter yields a distinct effective version ``<version>+p<5 hex of the params hash>``, so
predictions made under different parameters never share a version.

Pure: :func:`parse_ruleset` takes the file's text and the environment as a mapping (read once
by ``gpu_health.evaluator.main``); reading the file is ``gpu_health.evaluator.config.rules``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

from gpu_health.errors import ConfigError
from gpu_health.evaluator.rules.params import (
    FROZEN_KEYS,
    KEYS,
    OPTIONAL_KEYS,
    RuleParams,
    canonical_json,
    coerce,
    cross_problems,
    params_hash,
)
from gpu_health.yamlload import load_yaml

log = logging.getLogger(__name__)

ENV_PREFIX: Final = "GPU_HEALTH_RULE_"
_VERSION_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True, slots=True)
class RuleSet:
    """An effective rule set: what the worker runs and what every prediction is stamped with."""

    version: str  # effective version (base, or base+pXXXXX when overrides changed parameters)
    base_version: str  # the file's ``version:``
    params: RuleParams
    params_hash: str  # sha256 of params_json
    params_json: str  # canonical JSON of the frozen parameters
    origin: str  # file path (or a label for text parsed in tests)
    overrides: tuple[tuple[str, Any], ...] = ()  # accepted overrides (key, typed value)
    warnings: tuple[str, ...] = ()


def parse_ruleset(text: str, *, env: Mapping[str, str], origin: str = "<text>") -> RuleSet:
    """Pure: rule-file text and an environment mapping -> RuleSet. Raises ConfigError."""
    file_values, version = _parse_file(text, origin)
    values = dict(file_values)
    accepted, warnings = _apply_env(values, env)
    for message, keys in cross_problems(values):
        reverted = [k for k in keys if k in accepted]
        warnings.append(f"{message}; ignoring override(s) of {', '.join(reverted)}")
        for key in reverted:
            values[key] = file_values[key]
            del accepted[key]
    for warning in warnings:
        log.warning("rule set %s (%s): %s", version, origin, warning)
    params = RuleParams(**values)
    changed = any(values[k] != file_values[k] for k in FROZEN_KEYS)
    digest = params_hash(params)
    effective = f"{version}+p{digest[:5]}" if changed else version
    return RuleSet(
        version=effective,
        base_version=version,
        params=params,
        params_hash=digest,
        params_json=canonical_json(params.frozen_dict()),
        origin=origin,
        overrides=tuple(sorted(accepted.items())),
        warnings=tuple(warnings),
    )


def yaml_mapping(text: str, what: str) -> dict[str, Any]:
    """The YAML mapping of a rule or policy file, or ConfigError naming ``what``."""
    try:
        raw = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{what}: must be a mapping of keys to values")
    return raw


def _parse_file(text: str, origin: str) -> tuple[dict[str, Any], str]:
    """Validate the whole file and collect every problem before failing."""
    raw = yaml_mapping(text, f"rule file {origin}")
    problems: list[str] = []
    version = raw.get("version")
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        problems.append(
            f"version: must be a name of letters, digits, '.', '_' or '-' (no '+', which marks "
            f"overridden versions), got {version!r}"
        )
    unknown = sorted(str(k) for k in raw if k != "version" and k not in KEYS)
    problems += [f"{key}: unknown key" for key in unknown]
    # Optional keys: a missing `enabled` means on (fail-open), missing `fault_xids` ECC-only.
    values: dict[str, Any] = dict(OPTIONAL_KEYS)
    for key in KEYS:
        if key not in raw:
            if key not in OPTIONAL_KEYS:
                problems.append(f"{key}: missing")
            continue
        typed, problem = coerce(key, raw[key])
        if problem:
            problems.append(problem)
        else:
            values[key] = typed
    if not problems:
        problems += [message for message, _ in cross_problems(values)]
    if problems:
        raise ConfigError([f"rule file {origin}: {p}" for p in problems])
    return values, str(version)


def _apply_env(values: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any],
                                                                         list[str]]:
    """Apply valid overrides in place; return the accepted ones and the warnings."""
    accepted: dict[str, Any] = {}
    warnings: list[str] = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX):].lower()
        if key not in KEYS:
            warnings.append(f"{name}: not a rule parameter (known: {', '.join(KEYS)}); ignored")
            continue
        typed, problem = coerce(key, env[name])
        if problem:
            warnings.append(f"{name}={env[name]!r} ignored, keeping {values[key]!r}: {problem}")
            continue
        values[key] = typed
        accepted[key] = typed
    return accepted, warnings


def params_diff(stored: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences, one entry per key, sorted by key."""
    return [
        f"{key}: stored {stored.get(key, '(absent)')!r}, now {new.get(key, '(absent)')!r}"
        for key in sorted(set(stored) | set(new))
        if stored.get(key) != new.get(key)
    ]
