"""What a calibration searches: ``--search name=v1,v2`` items, or the default space (pure).

Candidates are effective versions made by the override mechanism the live evaluator and the
backtest's ``--sweep`` use (:func:`gpu_health.evaluator.backtest.rulesets.variants`): each
combination that changes a frozen parameter is ``<base>+p<hash>`` and is replayed in the same file
beside the others. Only frozen single-valued parameters can be searched.

The default space covers the three trend thresholds of the correctable-ECC growth signal and
whether its windows cap their busiest hours, 4 x 4 x 3 x 2 = 96 candidates:

- ``min_increase`` 4, 8, 16, 32: how many new correctable errors the last growth window needs
  (v1/v2 ship 32);
- ``ratio`` 1.2, 1.6, 2, 3: how far above the baseline mean rate that window must be;
- ``consecutive_windows`` 1, 2, 3: how many windows must rise strictly (1: no shape gate);
- ``cap_busiest_hours`` 0, 3: whether the growth gates count each window's three busiest hours
  as its fourth (3: a burst confined to two hours cannot fire the signal).

From a base that reads the weak layer (``weak_gate`` not ``none``, as ``v4-ecc-weak``), the
default space also asks whether the weak layer gates the trend predictions: ``weak_gate``
``evidence`` (it only lists its signals) and ``require`` (a trend prediction needs one), 192
candidates. A base that does not read it is searched as before; ``--search weak_gate=...``
asks anyway.

The growth window, the baseline span and the hit window stay as the base has them: they change
what a prediction means (and what its precision is measured against), not how eager the rule
is, so changing them is a decision for an operator, who can still search them explicitly.
Combinations the base cannot take (a ratio above baseline / growth window) are left out of the
default space; an explicit ``--search`` value the rule cannot take is an error, as in a sweep.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from gpu_health.evaluator.backtest.rulesets import Variant, parse_sweeps, variants
from gpu_health.evaluator.rules.params import coerce, cross_problems
from gpu_health.evaluator.rules.ruleset import RuleSet

DEFAULT_SPACE: Final[tuple[tuple[str, list[str]], ...]] = (
    ("min_increase", ["4", "8", "16", "32"]),
    ("ratio", ["1.2", "1.6", "2", "3"]),
    ("consecutive_windows", ["1", "2", "3"]),
    ("cap_busiest_hours", ["0", "3"]),
)

WEAK_SPACE: Final = ("weak_gate", ["evidence", "require"])

Space = list[tuple[str, list[str]]]


def parse_space(items: Sequence[str]) -> tuple[Space, bool]:
    """The ``--search`` items (ConfigError lists every problem), or the default space; and
    whether it is the default."""
    if not items:
        return [(k, list(v)) for k, v in DEFAULT_SPACE], True
    return parse_sweeps(items), False


def space_for(base: RuleSet, space: Space, default: bool) -> Space:
    """The space searched from ``base``: the default one gains the weak layer's gate when the
    base reads it."""
    if default and base.params.reads_weak and all(k != WEAK_SPACE[0] for k, _ in space):
        return [*space, (WEAK_SPACE[0], list(WEAK_SPACE[1]))]
    return space


def candidates(base_file: Path, base: RuleSet, space: Space, default: bool) -> list[Variant]:
    """Every combination as a version; the default space drops those the base cannot take."""
    if not default:
        return variants([base_file], space)
    keys = [k for k, _ in space]
    found: dict[str, Variant] = {}
    for combo in itertools.product(*(values for _, values in space)):
        values = base.params.as_dict() | {
            k: coerce(k, v)[0] for k, v in zip(keys, combo, strict=True)}
        if cross_problems(values):
            continue
        for v in variants([base_file], [(k, [x]) for k, x in zip(keys, combo, strict=True)]):
            found.setdefault(v.ruleset.version, v)
    return list(found.values())
