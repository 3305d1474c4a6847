"""The ``dedup`` section and ``keepalive``: how the write rule remembers the last reading of
each card, and how often an unchanged card is written anyway (docs/evaluator-ingest.md).
Declared in :data:`DEDUP` and :data:`KEEPALIVE` (read by ``config/file.py`` with the other
top-level keys); every problem is recorded in the Checker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.setting_tables import Setting, Table

DEDUP: Final = Table("dedup", (
    # Cards remembered: 100,000 cards fit with room. An entry exists only for a card scraped in
    # the last idle_seconds, so a small fleet pays only for its cards (about 0.6 KB each, and
    # 0.5 KB per XID series, measured; docs/evaluator-ingest.md); a cap below the fleet makes
    # the LRU evict every card each cycle (+36% ingest CPU at 100,000 cards behind 4,096).
    Setting("max_entries", "int", 131_072, 1, 10_000_000),
    Setting("idle_seconds", "duration", 1800.0),
))
# Top-level keys. An unchanged card still gets one row per keepalive (the reference's 288 rows
# per card-day at most); the write rule, simulate and the backtest take this default from here.
KEEPALIVE: Final = Table("", (
    Setting("keepalive", "duration", 300.0),
    Setting("keepalive_seconds", "custom", None),  # its old name, read with a warning
))
DEFAULT_KEEPALIVE: Final = timedelta(seconds=KEEPALIVE.defaults["keepalive"])


@dataclass(frozen=True, slots=True)
class DedupConfig:
    max_entries: int = DEDUP.defaults["max_entries"]
    idle_seconds: float = DEDUP.defaults["idle_seconds"]


def parse_dedup(c: Checker, raw: Mapping[str, Any]) -> DedupConfig:
    return DedupConfig(**DEDUP.read(c, c.section(raw, "dedup", DEDUP.keys)))

