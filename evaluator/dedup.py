"""The write-dedup cache (reference: "写入去重缓存"): per series, the latest row confirmed in DB.

The cache only ever answers "this scrape can safely be skipped"; the store stays the authority:

- an entry is filled only from rows the store reported (a SELECT result, or a batch whose INSERT
  committed), never from a scrape that has not been written;
- losing an entry costs at most one SELECT (batched with every other miss of the cycle);
- entries are bounded (``max_entries``, least recently used evicted first) and idle ones (not
  looked up or confirmed for ``idle``) are dropped, so cards that left the fleet do not pin memory.

One LRU implementation (:class:`RowCache`) serves two row kinds: :class:`DedupCache` holds the
latest ``gpu_health_samples`` row per card, :class:`XidDedupCache` the latest
``gpu_health_xid_samples`` row per (card, XID code). Time comes from the caller (``now``), never
from a clock read here.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Final, Generic, Protocol, TypeVar

from evaluator.ingest_xid import XidKey, XidSample
from evaluator.model import CardKey, Sample

DEFAULT_MAX_ENTRIES: Final = 4096  # 512 nodes x 8 cards
DEFAULT_IDLE: Final = timedelta(minutes=30)
# XID series per card in the cache's sizing: the exporter exports the five memory XIDs from its
# start, and a card rarely logs more than a few other codes.
XID_SERIES_PER_CARD: Final = 8

K = TypeVar("K")
K_co = TypeVar("K_co", covariant=True)


class _Keyed(Protocol[K_co]):
    @property
    def key(self) -> K_co: ...


R = TypeVar("R", bound=_Keyed)


class RowCache(Generic[K, R]):
    """LRU map key -> (confirmed latest row, last use). Not thread-safe: use from one loop."""

    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, idle: timedelta = DEFAULT_IDLE
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self.idle = idle
        self._entries: OrderedDict[K, tuple[R, datetime]] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.evicted_capacity = 0
        self.evicted_idle = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: K, now: datetime) -> R | None:
        """The confirmed latest row of ``key`` (counts a hit or a miss, refreshes its use)."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries[key] = (entry[0], now)
        self._entries.move_to_end(key)
        return entry[0]

    def confirm(self, row: R, now: datetime) -> None:
        """Record ``row`` as its series' latest row (call only after the store reported it)."""
        key: K = row.key
        self._entries[key] = (row, now)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
            self.evicted_capacity += 1

    def forget(self, key: K) -> None:
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


class DedupCache(RowCache[CardKey, Sample]):
    """Latest confirmed ``gpu_health_samples`` row per card."""


class XidDedupCache(RowCache[XidKey, XidSample]):
    """Latest confirmed ``gpu_health_xid_samples`` row per (card, XID code)."""

    @classmethod
    def sized_for(cls, cards: DedupCache) -> XidDedupCache:
        """A cache for the XID series of as many cards as ``cards`` holds, same idle time."""
        return cls(cards.max_entries * XID_SERIES_PER_CARD, cards.idle)
