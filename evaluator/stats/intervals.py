"""Confidence intervals for the ratios the statistics report (pure).

Every precision and recall is a proportion of a small count (20 matured predictions, a few dozen
faulty cards), so the point value alone says little: 0.30 from 6 of 20 and 0.30 from 300 of
1,000 are different evidence. The Wilson score interval (Wilson 1927) is used because it stays
inside [0, 1] and behaves at 0 and n successes, where the textbook normal interval collapses to
a single point; it is what the statistics literature recommends for small n (Brown, Cai and
DasGupta, "Interval Estimation for a Binomial Proportion", Statistical Science 16(2), 2001).

A ratio that is null (not enough data) has a null interval too: an interval is never a way to
show a number the gates withhold.
"""

from __future__ import annotations

import math
from typing import Final

Z95: Final = 1.959963984540054  # the two-sided 95% quantile of the standard normal


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes`` out of ``n`` (None when ``n`` is 0)."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within 0..{n}, got {successes}")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # Exact at the ends: rounding must not put 0 or n successes outside their own interval.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def ci95(successes: int, n: int, shown: float | None) -> list[float] | None:
    """``[low, high]`` for the JSON answer, or None when the ratio itself is not shown."""
    if shown is None:
        return None
    bounds = wilson(successes, n)
    return None if bounds is None else [round(bounds[0], 6), round(bounds[1], 6)]
