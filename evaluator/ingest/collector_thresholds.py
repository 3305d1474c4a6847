"""The evaluator process's garbage-collector thresholds, set once at start-up.

CPython collects its youngest generation every 700 net allocations and the oldest one whenever
a quarter more objects have survived since the last full pass. An evaluator holds millions of
long-lived objects (a parse memo entry per target, a dedup-cache entry per card and per XID
series) and a scrape cycle allocates millions more, so at 100,000 cards the default thresholds
spent 6-12 of the first cycle's 27-33 CPU-seconds walking the heap, and a cycle with collection
off took 21.8 (measured with ``bench.ingest_fleet``'s fleet, Python 3.11, 2 cores). Larger
young generations leave reference counting to free nearly everything, as it does anyway; only
reference cycles wait a little longer, a bounded amount of memory.
"""

from __future__ import annotations

import gc
from typing import Final

# (young, middle, old): collect the young generation every 50,000 net allocations, the middle
# one every 20 of those; the old one keeps CPython's own rule. 21.0 CPU-s for the cycle above.
THRESHOLDS: Final = (50_000, 20, 10)


def apply() -> tuple[int, int, int]:
    """Set :data:`THRESHOLDS` for this process; returns the thresholds it replaced."""
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    return before
