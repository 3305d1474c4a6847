"""The ingest fleet (bench/ingest_fleet.py) holds the cards it claims: every target answers the
exporter's own exposition for 8 distinct cards with their own UUIDs, which the evaluator's parser
reads whole (no series ignored, no value unknown), and 12,500 targets name 100,000 distinct
cards."""

from __future__ import annotations

from bench.ingest_fleet import GPUS, cards_text, node_name, tail_text, uuid
from gpu_health.evaluator.ingest.cards import parse_cards


def test_a_hundred_thousand_cards_have_distinct_names_and_uuids() -> None:
    cards = [(node_name(t), g) for t in range(12_500) for g in range(GPUS)]
    assert len(set(cards)) == 100_000
    assert len({uuid(t, g) for t in range(12_500) for g in range(GPUS)}) == 100_000


def test_each_answer_is_the_exporters_exposition_of_its_own_eight_cards() -> None:
    seen: set[tuple[str | None, str | None]] = set()
    for target in (0, 1, 9_999, 12_499):
        extraction = parse_cards(cards_text(target, {target * GPUS + 3: 7}) + tail_text(2))
        assert extraction.node_name == node_name(target)
        assert [c.gpu_index for c in extraction.cards] == list(range(GPUS))
        assert (extraction.ignored_series, extraction.unknown_values) == ({}, {})
        assert extraction.cards[3].counters.ecc_corrected_total == 7
        assert all(len(c.xids) == 5 for c in extraction.cards)
        seen |= {(extraction.node_name, c.gpu_uuid) for c in extraction.cards}
    assert len(seen) == 4 * GPUS
