"""Per-target limits like Prometheus's ``sample_limit``: a flooding target fails alone, writes
nothing, and the other targets of the same cycle are stored as usual."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gpu_health.errors import ConfigError, ParseError
from gpu_health.evaluator.compose import build_service
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.config.scrape import DEFAULT_MAX_CARDS, DEFAULT_SAMPLE_LIMIT
from gpu_health.evaluator.ingest.cards import parse_cards
from tests.evaluator.ingest_support import Card, FakeClock, StandIn, a100, render, stand_in

FLOOD_CARDS = 100_000


def flood(cards: int) -> str:
    """What a broken or hostile exporter might send: a known counter for each of ``cards``
    fake cards (without the limit, every one of them is a first sample: one row each)."""
    return "".join(f'gpu_health_ecc_corrected_total{{gpu="{i}"}} 1\n' for i in range(cards))


@pytest.fixture
async def server() -> AsyncIterator[StandIn]:
    async with stand_in() as s:
        s.bodies["good"] = render([Card(i, f"GPU-{i}", a100(i)) for i in range(16)])
        s.bodies["flood"] = flood(FLOOD_CARDS)
        s.bodies["wide"] = render([Card(i, f"GPU-{i}", a100(i)) for i in range(80)])
        yield s


def config(tmp_path: Path, server: StandIn, **scrape: Any) -> Any:
    targets = [{"targets": [f"127.0.0.1:{server.port}"],
                "labels": {"node": name, "__metrics_path__": f"/t/{name}/metrics"}}
               for name in ("good", "flood", "wide")]
    return parse_config({"static_configs": targets, "storage": {"path": "ev.duckdb"},
                         "scrape": scrape}, base=tmp_path)


async def test_a_flooding_target_fails_alone_and_writes_nothing(server: StandIn,
                                                                tmp_path: Path) -> None:
    assert len(server.bodies["flood"]) < 10 * 1024 * 1024  # under the body cap: only the
    service = build_service(config(tmp_path, server), {}, clock=FakeClock(),  # limit stops it
                            start_loops=False)
    await service.app.open()  # start hooks and the at-start discovery tick; no loops
    try:
        assert service.pipeline is not None
        report = await service.pipeline.run_cycle()
        results = service.pipeline.last_results
        by_node = {r.target.node_id: r for r in results.values()}
        assert by_node["good"].ok and report.rows_written == 16
        for node in ("flood", "wide"):  # 100,000 samples; 80 cards > 64
            assert (by_node[node].ok, by_node[node].error_reason) == (False, "sample_limit")
        rows = dict(service.db.fetchall(
            "SELECT node_id, count(*) FROM gpu_health_samples GROUP BY 1"))
        assert rows == {"good": 16}
        metrics = service.app.registry
        assert metrics.get_sample_value("gpu_health_evaluator_scrape_errors_total",
                                        {"reason": "sample_limit"}) == 2
    finally:
        await service.app.close()


def test_limits_are_counted_on_every_sample_line_before_decoding() -> None:
    with pytest.raises(ParseError, match="more than 10 samples") as caught:
        parse_cards(flood(11), sample_limit=10)
    assert caught.value.reason == "sample_limit"
    assert len(parse_cards(flood(10), sample_limit=10).cards) == 10
    with pytest.raises(ParseError, match=r"more than 3 .*max_cards_per_target"):
        parse_cards(flood(4), max_cards=3)
    # unknown metrics count too, as in Prometheus: a flood of other series is still a flood
    other = "".join(f"foo_bar{{i=\"{i}\"}} 1\n" for i in range(11))
    with pytest.raises(ParseError, match="sample_limit"):
        parse_cards(other, sample_limit=10)


def test_the_defaults_fit_a_real_16_card_node_with_headroom() -> None:
    body = render([Card(i, f"GPU-{i}", a100(i), xids={48: 0, 63: 0, 64: 0, 94: 0, 95: 0})
                   for i in range(16)])
    samples = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    assert samples * 10 <= DEFAULT_SAMPLE_LIMIT and DEFAULT_MAX_CARDS >= 16 * 4
    assert len(parse_cards(body, sample_limit=DEFAULT_SAMPLE_LIMIT,
                           max_cards=DEFAULT_MAX_CARDS).cards) == 16


@pytest.mark.parametrize(("key", "value"), [("sample_limit", 0), ("max_cards_per_target", -1),
                                            ("sample_limit", "many")])
def test_bad_limits_fail_the_config(tmp_path: Path, key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"scrape.{key}"):
        parse_config({"scrape": {key: value}}, base=tmp_path)
