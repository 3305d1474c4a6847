"""Recognise a target's unchanged answer cheaply: the cards of its last scrape, kept by digest.

An exporter's answer changes every minute (its own timings, the process's CPU seconds) while
the lines the evaluator reads (the contract's series) rarely do: 1% of cards changing per cycle
leaves more than 90% of 8-GPU targets with the same lines as last time. For each target the memo
keeps a digest (BLAKE2b, 128 bits) of those lines and the :class:`CardExtraction` they gave.
A scrape validates every other line as :func:`~gpu_health.evaluator.ingest.cards.parse_cards`
does, collects the wanted lines without decoding them, and compares their digest: the same
digest means the same text, hence the same cards, already validated; only a changed target's
lines are parsed and validated. Any bad line, and a count past ``sample_limit``, goes through
:func:`parse_cards` itself, so errors name the same line and reason as without the memo.

One entry per target scraped in the last cycle (:meth:`ParseMemo.retain` drops the others):
a digest and the extraction, whose card objects the write rule's cache shares.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection

from gpu_health.errors import ParseError
from gpu_health.evaluator.ingest.cards import (
    CardExtraction,
    extract_cards,
    parse_cards,
    with_unknown_metrics,
)
from gpu_health.evaluator.ingest.contract_series import WANTED_METRICS
from gpu_health.evaluator.ingest.exposition import parse_plain_lines, parse_samples, split_wanted


class ParseMemo:
    """Per target key: (digest of the wanted lines, the cards they gave). Not thread-safe:
    use from one event loop."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[bytes, CardExtraction]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def parse(self, key: str, text: str, *, sample_limit: int | None = None,
              max_cards: int | None = None) -> CardExtraction:
        """What ``parse_cards(text, ...)`` returns (or raises), remembered under ``key``."""
        unused: Counter[str] = Counter()
        lines = split_wanted(text, WANTED_METRICS, unused, sample_limit)
        if lines is None:  # a bad line or too many samples: the full parser says which
            return parse_cards(text, sample_limit=sample_limit, max_cards=max_cards)
        wanted = "\n".join(lines)
        digest = hashlib.blake2b(wanted.encode(), digest_size=16).digest()
        entry = self._entries.get(key)
        if entry is not None and entry[0] == digest:
            self.hits += 1
            cards = entry[1]
        else:
            self.misses += 1
            try:
                samples = parse_plain_lines(lines)  # the exporter's own shape, read by str methods
                cards = extract_cards(samples if samples is not None
                                      else parse_samples(wanted, WANTED_METRICS))
            except ParseError:  # the line number is the answer's, not the wanted lines'
                return parse_cards(text, sample_limit=sample_limit, max_cards=max_cards)
            self._entries[key] = (digest, cards)
        if max_cards is not None and len(cards.cards) > max_cards:
            return parse_cards(text, sample_limit=sample_limit, max_cards=max_cards)
        return with_unknown_metrics(cards, unused)

    def retain(self, keys: Collection[str]) -> None:
        """Forget every target not in ``keys`` (it left the fleet)."""
        for key in [k for k in self._entries if k not in keys]:
            del self._entries[key]
