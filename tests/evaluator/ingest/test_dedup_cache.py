"""The dedup cache alone: LRU bound, idle eviction on an injected clock, hit/miss counts."""

from __future__ import annotations

from datetime import timedelta

from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.model import CardKey, Sample
from tests.evaluator.ingest_support import T0, a100


def row(node: str, gpu: int = 0) -> Sample:
    return Sample(CardKey(node, gpu), None, T0, a100(1))


def test_get_counts_hits_and_misses() -> None:
    cache = DedupCache(4)
    assert cache.get(CardKey("a", 0), T0) is None
    cache.confirm(row("a"), T0)
    assert cache.get(CardKey("a", 0), T0) == row("a")
    assert (cache.hits, cache.misses) == (1, 1)


def test_bounded_least_recently_used_goes_first() -> None:
    cache = DedupCache(3)
    for node in "abc":
        cache.confirm(row(node), T0)
    cache.get(CardKey("a", 0), T0)  # a is now the most recently used
    cache.confirm(row("d"), T0)
    assert len(cache) == 3
    assert CardKey("b", 0) not in cache and CardKey("a", 0) in cache
    assert cache.evicted_capacity == 1


def test_idle_entries_are_evicted_after_30_minutes() -> None:
    cache = DedupCache()
    cache.confirm(row("old"), T0)
    cache.confirm(row("busy"), T0)
    cache.get(CardKey("busy", 0), T0 + timedelta(minutes=20))
    assert cache.evict_idle(T0 + timedelta(minutes=29)) == 0
    assert cache.evict_idle(T0 + timedelta(minutes=30)) == 1
    assert CardKey("old", 0) not in cache and CardKey("busy", 0) in cache
    assert cache.evict_idle(T0 + timedelta(minutes=50)) == 1
    assert len(cache) == 0 and cache.evicted_idle == 2


def test_source_is_part_of_the_key() -> None:
    cache = DedupCache()
    cache.confirm(row("n"), T0)
    assert cache.get(CardKey("n", 0, "simulated"), T0) is None
