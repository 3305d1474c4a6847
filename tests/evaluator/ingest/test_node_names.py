"""A target without a ``node`` label is named after its exporter's own node name
(``gpu_health_node_info{node}``): parsed from a real exposition, resolved per cycle (a labelled
target wins a claimed node, then the first by address), learned for everything that names nodes
from the discovered targets, and written to a real DuckDB store through whole ingest cycles
against a real stand-in exporter."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cards import CardExtraction, parse_cards
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.identity import NodeNames, resolve_nodes
from gpu_health.evaluator.ingest.scrape import Scraper, ScrapeResult
from gpu_health.evaluator.ingest.scrape_tick import IngestPipeline
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.ingest_support import T0, Card, FakeClock, a100, render, stand_in


def named(body: str, *names: str) -> str:
    lines = "".join(f'gpu_health_node_info{{node="{n}"}} 1\n' for n in names)
    return body + "# TYPE gpu_health_node_info gauge\n" + lines if names else body


BODY = render([Card(0, "GPU-a", a100(3))])


def test_the_node_name_is_parsed_and_a_conflict_or_a_bad_one_names_nothing() -> None:
    assert parse_cards(named(BODY, "gpu-07")).node_name == "gpu-07"
    assert parse_cards(BODY).node_name is None  # not told: unknown
    two = parse_cards(named(BODY, "gpu-07", "gpu-08"))
    assert two.node_name is None and two.ignored_series["conflicting_node_name"] == 2
    for bad in ("", " padded", "x" * 254, "line\nbreak"):
        extraction = parse_cards(named(BODY, bad.replace("\n", "\\n")))
        assert extraction.node_name is None, bad
    assert len(parse_cards(named(BODY, "gpu-07")).cards) == 1  # the cards are unchanged


def result(url_host: str, *, node: str | None = None, said: str | None = None,
           ok: bool = True) -> ScrapeResult:
    target = Target(address=f"{url_host}:10346", node_id=node or url_host,
                    labelled=node is not None)
    return ScrapeResult(target, T0, 0.1, CardExtraction(node_name=said),
                        error_reason=None if ok else "timeout")


def test_a_labelled_target_keeps_its_node_and_a_second_claimant_fails() -> None:
    results = [result("10.0.0.2", said="gpu-07"), result("10.0.0.1", said="gpu-07"),
               result("10.0.0.3", node="gpu-07", said="other"), result("10.0.0.4", said="gpu-09"),
               result("10.0.0.5", said="gpu-10", ok=False)]
    resolved = resolve_nodes(results)
    assert [r.target.node_id for r in resolved] == ["gpu-07", "gpu-07", "gpu-07", "gpu-09",
                                                     "10.0.0.5"]
    assert [r.error_reason for r in resolved] == ["duplicate_node", "duplicate_node", None, None,
                                                  "timeout"]
    assert "already scraped from http://10.0.0.3:10346/metrics" in str(resolved[0].error)


@given(st.lists(st.tuples(st.integers(1, 6), st.sampled_from(["a", "b", "c", None]),
                          st.booleans()), max_size=12))
def test_each_node_has_at_most_one_answering_target(specs: list[tuple[int, str | None, bool]]
                                                    ) -> None:
    results = [result(f"10.0.0.{i}", node="a" if labelled else None, said=said)
               for i, said, labelled in specs]
    resolved = resolve_nodes(results)
    up = [r.target.node_id for r in resolved if r.ok]
    urls = {r.target.url for r in results}
    if len(urls) == len(results):  # distinct targets: one per node
        assert len(up) == len(set(up))


def test_names_are_learned_kept_while_down_and_forgotten_when_gone() -> None:
    names = NodeNames()
    raw = [result("10.0.0.1").target, result("10.0.0.2", node="lab").target]
    names.learn([result("10.0.0.1", said="gpu-07")], {t.url for t in raw})
    assert [t.node_id for t in names.apply(raw)] == ["gpu-07", "lab"]
    version = names.version
    names.learn([result("10.0.0.1", ok=False)], {t.url for t in raw})  # down: still gpu-07
    assert names.apply(raw)[0].node_id == "gpu-07" and names.version == version
    names.learn([result("10.0.0.1")], {t.url for t in raw})  # answered without a name
    assert names.apply(raw)[0].node_id == "10.0.0.1" and names.version == version + 1
    names.learn([result("10.0.0.1", said="gpu-07")], set())  # no longer discovered
    assert names.apply(raw)[0].node_id == "10.0.0.1"


async def test_cards_of_an_unlabelled_target_are_stored_under_the_exporters_name(
        tmp_path: Path) -> None:
    db = DuckDBDatabase(tmp_path / "names.duckdb")
    clock = FakeClock()
    names = NodeNames()
    async with stand_in() as server, Scraper(timeout=5, max_concurrency=4,
                                             max_response_bytes=1 << 20, clock=clock) as scraper:
        server.bodies["e1"] = named(BODY, "gpu-07")
        server.bodies["e2"] = named(render([Card(0, "GPU-b", a100(5))]), "gpu-07")
        server.bodies["e3"] = named(render([Card(0, "GPU-c", a100(9))]), "ignored")
        unlabelled = [replace(server.target(n), node_id="127.0.0.1", labelled=False)
                      for n in ("e1", "e2")]
        targets = [*unlabelled, server.target("e3", node="gpu-03")]
        pipeline = IngestPipeline(
            targets=lambda: names.apply(targets), scraper=scraper, clock=clock, names=names,
            ingestor=Ingestor(db, DedupCache(), keepalive=timedelta(minutes=5)))
        report = await pipeline.run_cycle()
        assert report.targets_up == 2  # e2 claims gpu-07 after e1: refused this cycle
        failed = pipeline.last_results[targets[1].url]
        assert failed.error_reason == "duplicate_node"
        rows = db.fetchall("SELECT node_id, gpu_uuid FROM gpu_health_samples ORDER BY 1")
        assert rows == [("gpu-03", "GPU-c"), ("gpu-07", "GPU-a")]
        # the refused claimant's name is not learned: it names no node while it is refused
        assert [t.node_id for t in names.apply(targets)] == ["gpu-07", "127.0.0.1", "gpu-03"]
        nodes = db.fetchall("SELECT node_id FROM gpu_health_nodes ORDER BY 1")
        assert nodes == [("gpu-03",), ("gpu-07",)]
    db.close()
