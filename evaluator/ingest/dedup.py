"""The write-dedup cache (reference: "写入去重缓存"): per series, the latest row confirmed in DB.

The cache only ever answers "this scrape can safely be skipped"; the store stays the authority:

- an entry is filled only from rows the store reported (a SELECT result, or a batch whose INSERT
  committed), never from a scrape that has not been written;
- losing an entry costs at most one SELECT (batched with every other miss of the cycle);
- entries are bounded (``max_entries``, least recently used evicted first) and idle ones (not
  looked up or confirmed for ``idle``) are dropped, so cards that left the fleet do not pin memory.

:func:`rows_to_write` is the one algorithm that applies a write rule through a cache, for card
samples and XID counts alike: cache hits are decided at once, all misses are looked up in one
batched call, every looked-up row confirms its cache entry, then the rule decides.

One LRU implementation (:class:`RowCache`) serves three row kinds: :class:`DedupCache` holds
the latest ``gpu_health_samples`` row per card, :class:`XidDedupCache` the latest
``gpu_health_xid_samples`` row per (card, XID code), :class:`SxidDedupCache` the latest
``gpu_health_sxid_samples`` row per NVSwitch SXid series. Time comes from the caller (``now``),
never from a clock read here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Generic, Protocol, TypeVar

from gpu_health.evaluator.config.writes import DedupConfig
from gpu_health.evaluator.ingest.write_rule import WriteDecision
from gpu_health.evaluator.model import CardKey, Sample, SxidKey, SxidSample, XidKey, XidSample

DEFAULT_MAX_ENTRIES: Final = DedupConfig().max_entries  # dedup.max_entries's default
DEFAULT_IDLE: Final = timedelta(seconds=DedupConfig().idle_seconds)
# XID series per card in the cache's sizing: the exporter exports the five memory XIDs from its
# start, and a card rarely logs more than a few other codes.
XID_SERIES_PER_CARD: Final = 8

K = TypeVar("K")
K_co = TypeVar("K_co", covariant=True)


class _Keyed(Protocol[K_co]):
    @property
    def key(self) -> K_co: ...

    @property
    def sampled_at(self) -> datetime: ...


R = TypeVar("R", bound=_Keyed)


class RowCache(Generic[K, R]):
    """LRU map key -> confirmed latest row, with each key's last use. Not thread-safe: use
    from one loop.

    Two plain dicts, the uses kept in use order (a use moves its key to the end): 84 bytes an
    entry against 147 for an OrderedDict of (row, last use) pairs, and a hit allocates nothing.
    At 100,000 cards with five XID series each that is 600,000 entries."""

    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, idle: timedelta = DEFAULT_IDLE
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self.idle = idle
        self._rows: dict[K, R] = {}
        self._used: dict[K, datetime] = {}  # least recently used first
        self.hits = 0
        self.misses = 0
        self.evicted_capacity = 0
        self.evicted_idle = 0

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def get(self, key: K, now: datetime) -> R | None:
        """The confirmed latest row of ``key`` (counts a hit or a miss, refreshes its use)."""
        row = self._rows.get(key)
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        self._use(key, now)
        return row

    def confirm(self, row: R, now: datetime) -> None:
        """Record ``row`` as its series' latest row (call only after the store reported it)."""
        key: K = row.key
        self._rows[key] = row
        self._use(key, now)
        while len(self._rows) > self.max_entries:
            self._drop(next(iter(self._used)))
            self.evicted_capacity += 1

    def _use(self, key: K, now: datetime) -> None:
        used = self._used
        used.pop(key, None)
        used[key] = now

    def _drop(self, key: K) -> None:
        del self._rows[key]
        del self._used[key]

    def forget_where(self, match: Callable[[K], bool]) -> int:
        """Drop the entries whose key matches; returns how many."""
        gone = [key for key in self._rows if match(key)]
        for key in gone:
            self._drop(key)
        return len(gone)

    def evict_idle(self, now: datetime) -> int:
        """Drop entries not used since ``now - idle``; returns how many were dropped."""
        cutoff = now - self.idle
        dropped = 0
        # Entries are in last-use order, so the idle ones are all at the front.
        while self._used:
            key, used = next(iter(self._used.items()))
            if used > cutoff:
                break
            self._drop(key)
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


class SxidDedupCache(RowCache[SxidKey, SxidSample]):
    """Latest confirmed ``gpu_health_sxid_samples`` row per NVSwitch SXid series."""

    @classmethod
    def sized_for(cls, cards: DedupCache) -> SxidDedupCache:
        """As many entries as ``cards`` (SXid series are a node's, a few per switch after
        errors; a node has fewer switches than cards), same idle time."""
        return cls(cards.max_entries, cards.idle)


@dataclass(slots=True)
class Chosen(Generic[R]):
    """What :func:`rows_to_write` kept, and how the cache and the store were used."""

    rows: list[R] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    selects: int = 0


async def rows_to_write(
    scraped: Sequence[R], cache: RowCache[K, R],
    lookup: Callable[[Sequence[R]], Awaitable[Mapping[K, R]]],
    rule: Callable[[R, R | None], WriteDecision], decisions: Counter[str],
) -> Chosen[R]:
    """The scraped rows ``rule`` keeps against each series' latest confirmed row.

    ``lookup`` is called at most once, with every row the cache missed, and returns the stored
    latest row per key (absent: none stored). Each decision's reason is counted in ``decisions``.
    """
    chosen: Chosen[R] = Chosen()
    missed: list[R] = []
    for row in scraped:
        cached = cache.get(row.key, row.sampled_at)
        if cached is None:
            missed.append(row)
        else:
            chosen.hits += 1
            _apply(rule(row, cached), row, chosen, decisions)
    chosen.misses = len(missed)
    if missed:
        chosen.selects = 1
        stored = await lookup(missed)
        for row in missed:
            found = stored.get(row.key)
            if found is not None:
                cache.confirm(found, row.sampled_at)
            _apply(rule(row, found), row, chosen, decisions)
    return chosen


def _apply(decision: WriteDecision, row: R, chosen: Chosen[R], decisions: Counter[str]) -> None:
    decisions[decision.reason] += 1
    if decision.write:
        chosen.rows.append(row)
