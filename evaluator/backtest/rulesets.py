"""Rule files x ``--sweep`` combinations -> the effective versions a backtest replays.

A sweep value goes through the same mechanism as an environment override
(``GPU_HEALTH_RULE_<KEY>``, :func:`gpu_health.evaluator.config.rules.load_ruleset` with an explicit
environment), so a combination that changes a frozen parameter is its own effective version
``<version>+p<hash>`` and never shares predictions with another. Unlike the live evaluator, a
backtest reads no overrides from its own environment: the command line alone says what ran.

Where the live loader ignores a bad override with a warning (an operator's typo must not switch
a rule off), a sweep value the rule cannot take is an error listing every problem: a sweep that
silently ran the file's value would report numbers for a combination that never ran. Only
frozen, single-valued parameters can be swept: the others (scan interval, statistics gates) do
not change which predictions are made, so they would not yield distinct versions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.rules import BASELINE_FILES, load_ruleset
from gpu_health.evaluator.rules.params import FROZEN_KEYS, SPEC_BY_KEY, coerce
from gpu_health.evaluator.rules.ruleset import ENV_PREFIX, RuleSet


@dataclass(frozen=True, slots=True)
class Variant:
    """One effective version to replay, and the swept values that made it."""

    ruleset: RuleSet
    swept: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        values = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in self.swept)
        return f"{self.ruleset.version} ({values})" if values else self.ruleset.version


# The most combinations one sweep or calibration replays (docs/backtest.md): each costs a replay
# share, and an effective version's name carries 5 hex digits of its parameters' hash, so
# thousands of versions would collide by name (birthday odds: ~2% at 256, ~99% at 10,000).
MAX_COMBINATIONS: Final = 256


def parse_sweeps(items: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``name=v1,v2`` items -> [(key, [text values])]; ConfigError lists every problem."""
    problems: list[str] = []
    result: list[tuple[str, list[str]]] = []
    for item in items:
        name, sep, values_text = item.partition("=")
        key = name.strip().lower()
        values = [v.strip() for v in values_text.split(",") if v.strip()]
        if not sep or not values:
            problems.append(f"--sweep {item!r}: expected name=value1,value2,...")
            continue
        spec = SPEC_BY_KEY.get(key)
        if spec is None:
            problems.append(f"--sweep {item!r}: {key!r} is not a rule parameter (known: "
                            f"{', '.join(SPEC_BY_KEY)})")
            continue
        if key not in FROZEN_KEYS or not _sweepable(key):
            problems.append(f"--sweep {item!r}: {key} is not a frozen single-valued parameter, "
                            "so it would not make a distinct version (sweepable: "
                            f"{', '.join(k for k in FROZEN_KEYS if _sweepable(k))})")
            continue
        if any(k == key for k, _ in result):
            problems.append(f"--sweep {item!r}: {key} is swept twice")
            continue
        for value in values:
            _, problem = coerce(key, value)
            if problem:
                problems.append(f"--sweep {item!r}: {problem}")
        result.append((key, list(dict.fromkeys(values))))
    combinations = math.prod(len(values) for _, values in result)
    if combinations > MAX_COMBINATIONS:
        problems.append(f"--sweep/--search: {combinations} combinations; at most "
                        f"{MAX_COMBINATIONS} (search fewer values, or in steps)")
    if problems:
        raise ConfigError(problems)
    return result


def _sweepable(key: str) -> bool:
    return SPEC_BY_KEY[key].kind in ("int", "float", "string")


def baseline_variants(found: Sequence[Variant],
                      files: Sequence[Path] = BASELINE_FILES) -> list[Variant]:
    """The baseline rule sets, once per hit window the requested versions use (a version is
    only ever compared with baselines of its own window)."""
    windows = sorted({v.ruleset.params.window_days for v in found})
    taken = {v.ruleset.version for v in found}
    return [b for b in variants(files, [("window_days", [str(w) for w in windows])])
            if b.ruleset.version not in taken]


def variants(rule_files: Sequence[Path], sweeps: Sequence[tuple[str, list[str]]]) -> list[Variant]:
    """Every rule file crossed with every combination of swept values, deduplicated by
    effective version; ConfigError lists every combination a rule cannot take."""
    problems: list[str] = []
    found: dict[str, Variant] = {}
    keys = [k for k, _ in sweeps]
    for path in rule_files:
        for combo in itertools.product(*(values for _, values in sweeps)):
            env = {f"{ENV_PREFIX}{k.upper()}": v for k, v in zip(keys, combo, strict=True)}
            try:
                ruleset = load_ruleset(path, env=env)
            except ConfigError as exc:
                problems.extend(exc.problems)
                break
            accepted = dict(ruleset.overrides)
            rejected = [k for k in keys if k not in accepted]
            if rejected:
                problems.append(f"{path}: {', '.join(f'{k}={v}' for k, v in env.items())}: "
                                f"{'; '.join(ruleset.warnings)}")
                continue
            variant = Variant(ruleset, tuple((k, accepted[k]) for k in keys))
            known = found.get(ruleset.version)
            if known is not None and known.ruleset.params_hash != ruleset.params_hash:
                problems.append(f"{path}: version {ruleset.version!r} also comes from "
                                f"{known.ruleset.origin} with other parameters (two parameter "
                                "sets whose names collide); rename one or sweep other values")
            found.setdefault(ruleset.version, variant)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
    return list(found.values())
