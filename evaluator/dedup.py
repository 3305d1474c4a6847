"""The write-dedup cache (reference: "写入去重缓存"): per card, the latest row confirmed in the DB.

The cache only ever answers "this scrape can safely be skipped"; the store stays the authority:

- an entry is filled only from rows the store reported (a SELECT result, or a batch whose INSERT
  committed), never from a scrape that has not been written;
- losing an entry costs at most one SELECT (batched with every other miss of the cycle);
- entries are bounded (``max_entries``, least recently used evicted first) and idle ones (not
  looked up or confirmed for ``idle``) are dropped, so cards that left the fleet do not pin memory.

Time comes from the caller (``now``), never from a clock read here.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Final

from evaluator.model import CardKey, Sample

DEFAULT_MAX_ENTRIES: Final = 4096  # 512 nodes x 8 cards
DEFAULT_IDLE: Final = timedelta(minutes=30)


class DedupCache:
    """LRU map CardKey -> (confirmed latest row, last use). Not thread-safe: use from one loop."""

    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, idle: timedelta = DEFAULT_IDLE
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self.idle = idle
        self._entries: OrderedDict[CardKey, tuple[Sample, datetime]] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.evicted_capacity = 0
        self.evicted_idle = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: CardKey, now: datetime) -> Sample | None:
        """The confirmed latest row of ``key`` (counts a hit or a miss, refreshes its use)."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries[key] = (entry[0], now)
        self._entries.move_to_end(key)
        return entry[0]

    def confirm(self, row: Sample, now: datetime) -> None:
        """Record ``row`` as its card's latest row (call only after the store reported it)."""
        self._entries[row.key] = (row, now)
        self._entries.move_to_end(row.key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
            self.evicted_capacity += 1

    def forget(self, key: CardKey) -> None:
        self._entries.pop(key, None)

    def evict_idle(self, now: datetime) -> int:
        """Drop entries not used since ``now - idle``; returns how many were dropped."""
        cutoff = now - self.idle
        dropped = 0
        # Entries are in last-use order, so the idle ones are all at the front.
        while self._entries:
            key, (_, used) = next(iter(self._entries.items()))
            if used > cutoff:
                break
            del self._entries[key]
            dropped += 1
        self.evicted_idle += dropped
        return dropped
