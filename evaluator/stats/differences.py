"""Whether one version's proportion beats another's beyond chance (pure): 95% intervals for a
difference of two proportions, after Newcombe (1998).

- **Unpaired** (precision: two versions' own predictions, different sets):
  :func:`unpaired_difference`, Newcombe's hybrid score interval ("method 10", Statistics in
  Medicine 17:873-890): each proportion's Wilson interval, combined.
- **Paired** (recall: the same faulty cards, each caught or not by each version):
  :func:`paired_difference`, Newcombe's method 10 for paired data (Statistics in Medicine
  17:2635-2650), the Wilson intervals of the two marginal proportions combined with the phi
  correlation of the 2x2 table (corrected as the paper does); and :func:`mcnemar_exact`, the
  exact McNemar test on the discordant cards, for the report.

A difference "beyond chance" is one whose interval excludes 0. Both intervals keep inside
[-1, 1] and behave at 0 and n, where the textbook Wald interval collapses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpu_health.evaluator.stats.intervals import Z95, wilson


@dataclass(frozen=True, slots=True)
class Difference:
    """``estimate`` = first minus second, with its 95% interval and the method's name."""

    estimate: float
    low: float
    high: float
    method: str

    @property
    def above_zero(self) -> bool:
        return self.low > 0

    @property
    def below_zero(self) -> bool:
        return self.high < 0

    def as_dict(self) -> dict[str, Any]:
        return {"estimate": round(self.estimate, 6), "ci95": [round(self.low, 6),
                                                              round(self.high, 6)],
                "method": self.method}

    def text(self) -> str:
        return f"{self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def unpaired_difference(x1: int, n1: int, x2: int, n2: int, z: float = Z95) -> Difference:
    """``x1/n1 - x2/n2`` with Newcombe's hybrid score interval (both ``n`` above 0)."""
    w1, w2 = wilson(x1, n1, z), wilson(x2, n2, z)
    if w1 is None or w2 is None:
        raise ValueError("both proportions need at least one observation")
    p1, p2 = x1 / n1, x2 / n2
    (l1, u1), (l2, u2) = w1, w2
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Difference(d, max(-1.0, low), min(1.0, high), "Newcombe hybrid score (unpaired)")


def paired_difference(both: int, only_first: int, only_second: int, neither: int,
                      z: float = Z95) -> Difference:
    """``(both + only_first)/n - (both + only_second)/n`` for ``n`` paired items, with
    Newcombe's paired method 10 (``n`` above 0)."""
    a, b, c, d = both, only_first, only_second, neither
    n = a + b + c + d
    w1, w2 = wilson(a + b, n, z), wilson(a + c, n, z)
    if w1 is None or w2 is None:
        raise ValueError("no paired item")
    p1, p2 = (a + b) / n, (a + c) / n
    (l1, u1), (l2, u2) = w1, w2
    phi = _phi(a, b, c, d)
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2)
                          + (u2 - p2) ** 2))
    epsilon = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2)
                            + (p2 - l2) ** 2))
    diff = p1 - p2
    return Difference(diff, max(-1.0, diff - delta), min(1.0, diff + epsilon),
                      "Newcombe method 10 (paired)")


def _phi(a: int, b: int, c: int, d: int) -> float:
    """The 2x2 table's phi, with Newcombe's continuity correction; 0 when a margin is 0."""
    denominator = (a + b) * (c + d) * (a + c) * (b + d)
    if denominator == 0:
        return 0.0
    n = a + b + c + d
    cross = a * d - b * c
    numerator = max(cross - n / 2, 0.0) if cross > 0 else cross
    return numerator / math.sqrt(denominator)


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """The exact two-sided McNemar p-value: the discordant items under a fair coin."""
    m = only_first + only_second
    if m == 0:
        return 1.0
    k = min(only_first, only_second)
    tail = sum(math.comb(m, i) for i in range(k + 1)) / 2 ** m
    return min(1.0, 2 * tail)
