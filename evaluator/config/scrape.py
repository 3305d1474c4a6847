"""The ``scrape`` section: how often and how far the evaluator scrapes its targets, and the
per-target limits like Prometheus's ``sample_limit`` / ``target_limit`` (docs/evaluator-ingest.md).
Declared in :data:`SCRAPE`; every problem is recorded in the Checker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.setting_tables import Setting, Table

SCRAPE: Final = Table("scrape", (
    Setting("interval", "duration", 60.0),
    Setting("timeout", "custom", 10.0),  # at most the interval (its default too)
    Setting("max_concurrency", "int", 64, 1, 10_000),
    Setting("max_response_bytes", "size", 10 * 1024 * 1024),
    # Like Prometheus's sample_limit: a node with 16 cards exports about 350 series (five
    # counters, gpu_info and the Xid series per card, plus the exporter's self-metrics); the
    # defaults leave 10x headroom and stop a runaway (or hostile) target long before it can
    # flood the store.
    Setting("sample_limit", "int", 5000, 1, 10_000_000),
    Setting("max_cards_per_target", "int", 64, 1, 100_000),
    # Like Prometheus's target_limit, per discovery file or http_sd answer: 100,000 GPUs are
    # ~12,500 nodes; a source listing more is refused whole (its last good targets stay).
    Setting("target_limit", "int", 20_000, 1, 10_000_000),
))
DEFAULT_SAMPLE_LIMIT: Final[int] = SCRAPE.defaults["sample_limit"]
DEFAULT_MAX_CARDS: Final[int] = SCRAPE.defaults["max_cards_per_target"]


@dataclass(frozen=True, slots=True)
class ScrapeConfig:
    interval: float = SCRAPE.defaults["interval"]
    timeout: float = SCRAPE.defaults["timeout"]
    max_concurrency: int = SCRAPE.defaults["max_concurrency"]
    max_response_bytes: int = SCRAPE.defaults["max_response_bytes"]
    sample_limit: int = DEFAULT_SAMPLE_LIMIT
    max_cards_per_target: int = DEFAULT_MAX_CARDS
    target_limit: int = SCRAPE.defaults["target_limit"]


def parse_scrape(c: Checker, value: object) -> ScrapeConfig:
    raw = c.section({"scrape": value}, "scrape", SCRAPE.keys)
    values = SCRAPE.read(c, raw)
    timeout = c.duration_at_most(raw, "timeout", "scrape.timeout", SCRAPE.defaults["timeout"],
                                 values["interval"], "scrape.interval")
    return ScrapeConfig(timeout=timeout, **values)
