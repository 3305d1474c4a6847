"""The Prometheus source's NVSwitch SXid counts: a node's series read with the scrape's label and
value rules, per step into that node's result (also without a card reading), then through the
live ingestor into a real DuckDB store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpu_health.contract import MAX_SXID_SERIES, SXID_METRIC
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.prometheus.assembly import Assembly, add_series
from gpu_health.evaluator.ingest.prometheus.metricsets import DCGM, OURS
from gpu_health.evaluator.ingest.prometheus.steps import node_targets, step_results
from gpu_health.evaluator.ingest.prometheus.sxids import add_sxids
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase

STEP = timedelta(minutes=1)
T0 = datetime(2026, 3, 1, tzinfo=UTC)
FATAL = (0, "0000:05:00", 20034, True)


def sxid(points: list[tuple[int, str]], **labels: str) -> dict[str, Any]:
    base = {"__name__": SXID_METRIC, "node": "n1", "nvswitch": "0", "pci_bus_id": "0000:05:00",
            "sxid": "20034", "severity": "fatal", "instance": "10.0.0.1:10346"}
    return {"metric": {**base, **labels},
            "values": [[(T0 + m * STEP).timestamp(), v] for m, v in points]}


def test_counts_per_node_and_step_with_the_scrape_rules() -> None:
    acc = Assembly()
    add_sxids(acc, OURS, [
        sxid([(0, "1"), (1, "NaN"), (2, "2")]),  # NaN: no count at that step, never 0
        sxid([(0, "3")], sxid="12028", severity="non_fatal", nvswitch="3"),
        sxid([(0, "1")], sxid="7", job="a"), sxid([(0, "4")], sxid="7", job="b"),  # disagree
        sxid([(0, "1")], severity="Fatal"),  # not a severity the exporter writes
        sxid([(0, "1")], node="", instance=""),  # no node
    ], None)
    assert acc.sxids == {"n1": {T0: {FATAL: 1, (3, "0000:05:00", 12028, False): 3},
                                T0 + 2 * STEP: {FATAL: 2}}}
    assert acc.dropped == {"sxid_series_without_identity": 2}


def test_a_node_name_from_dcgm_labels_and_the_series_bound() -> None:
    acc = Assembly()
    many = [sxid([(0, "1")], sxid=str(code)) for code in range(MAX_SXID_SERIES + 1)]
    add_sxids(acc, DCGM, [sxid([(0, "1")], Hostname="h1", node=""), *many], None)
    assert acc.sxids["h1"] == {T0: {FATAL: 1}}
    assert len(acc.sxids["10.0.0.1"][T0]) == MAX_SXID_SERIES  # no node label: the instance
    assert acc.dropped == {"sxid_series_limit": 1}


def test_steps_carry_the_counts_also_for_a_node_without_cards() -> None:
    acc = Assembly()
    add_series(acc, OURS, "gpu_health_ecc_corrected_total", [
        {"metric": {"gpu": "0", "uuid": "GPU-a", "node": "n1"},
         "values": [[T0.timestamp(), "5"]]}], None, {})
    add_sxids(acc, OURS, [sxid([(0, "1")]), sxid([(0, "2"), (1, "2")], node="n2")], None)
    out = step_results(acc, OURS, {}, node_targets("http://prom:9090"), {})
    first = {r.target.node_id: r.extraction for r in out[0][1]}
    assert len(first["n1"].cards) == 1 and first["n1"].sxids == ((FATAL, 1),)
    assert first["n2"].cards == () and first["n2"].sxids == ((FATAL, 2),)
    assert [(r.target.node_id, r.extraction.sxids) for r in out[1][1]] == [("n2", ((FATAL, 2),))]


def test_steps_through_the_live_ingestor_write_change_only(tmp_path: Path) -> None:
    acc = Assembly()
    add_sxids(acc, OURS, [sxid([(0, "1"), (1, "1"), (2, "1"), (4, "3")])], None)
    db = DuckDBDatabase(tmp_path / "sxid.duckdb")
    ingestor = Ingestor(db, DedupCache(), keepalive=timedelta(minutes=5))

    async def run() -> None:
        for _, results in step_results(acc, OURS, {}, node_targets("http://prom:9090"), {}):
            await ingestor.ingest(results)

    asyncio.run(run())
    assert db.fetchall("SELECT node_id, nvswitch, sxid, fatal, count FROM "
                       "gpu_health_sxid_samples ORDER BY sampled_at") == [
        ("n1", 0, 20034, True, 1), ("n1", 0, 20034, True, 3)]
    db.close()
