"""The ingest bench's stand-in exporters: N targets of G cards are N x G distinct cards, and
``--nvlink`` adds each card's 18 links x 3 NVLink error series and its total."""

from __future__ import annotations

import gzip

from prometheus_client.parser import text_string_to_metric_families

from bench.ingest import render
from gpu_health.evaluator.ingest.cards import parse_cards


def samples(body: bytes, name: str) -> list[dict[str, str]]:
    text = gzip.decompress(body).decode()
    return [s.labels for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name]


def test_targets_hold_distinct_cards_and_nvlink_adds_each_links_series() -> None:
    plain = [parse_cards(gzip.decompress(render(t, 8, {})).decode()) for t in range(3)]
    uuids = {card.gpu_uuid for e in plain for card in e.cards}
    assert len(uuids) == 24 and all(card.details.nvlink_errors is None
                                    for e in plain for card in e.cards)
    body = render(1, 8, {}, nvlink=True)
    links = samples(body, "gpu_health_nvlink_errors_total")
    assert len(links) == 8 * 18 * 3
    assert len({(s["gpu"], s["link"], s["counter"]) for s in links}) == 8 * 18 * 3
    extraction = parse_cards(gzip.decompress(body).decode())
    assert [c.details.nvlink_errors for c in extraction.cards] == [0] * 8
    assert extraction.ignored_series == {}
