"""Statistics from shared sample facts equal those computed alone (what calibration relies on
when it measures dozens of versions over one period)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.backtest.backtest_run import replay_all
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings import rollups
from gpu_health.evaluator.store.statistics.sample_facts import (
    base_params,
    first_evidence,
    sample_facts,
)
from gpu_health.evaluator.store.statistics.stats_queries import raw_stats
from tests.conftest import NewDb
from tests.evaluator.backtest_support import mixed_fleet, v1
from tests.evaluator.rules_support import at


def test_shared_facts_give_the_same_statistics(tmp_path: Path) -> None:
    db = DuckDBDatabase(tmp_path / "facts.duckdb")
    mixed_fleet(db, every_minutes=60)
    versions = [v1(scan_interval_minutes=360), v1(scan_interval_minutes=360, min_increase=8)]
    replay_all(db, versions, at(-8), at(38))
    cards = {(str(n), int(i), None if u is None else str(u)) for n, i, u in db.fetchall(
        "SELECT DISTINCT node_id, gpu_index, gpu_uuid FROM gpu_health_predictions")}
    for since, until in ((at(-8), at(38)), (at(2), at(20)), (at(15), at(38))):
        for xids in ((), (48, 63)):
            facts = sample_facts(db, since=since, until=until, source=SOURCE_REAL, nodes=None,
                                 fault_xids=xids, evidence_of=cards)
            for rs in versions:
                for as_of in (None, until - timedelta(days=3)):
                    args: dict[str, Any] = {"since": since, "until": until, "source": SOURCE_REAL,
                            "nodes": None, "fault_xids": xids, "rule_version": rs.version,
                            "as_of": as_of}
                    assert raw_stats(db, **args, facts=facts) == raw_stats(db, **args)
    with pytest.raises(ValueError, match="another period"):
        raw_stats(db, since=at(0), until=at(38), source=SOURCE_REAL, nodes=None, facts=facts)
    db.close()


def test_one_pass_evidence_equals_the_evidence_statement(new_db: NewDb) -> None:
    """The first evidence the one pass gives every card of the period (the period's segments,
    the sealed days before it, the raw rows before ``since``) equals :func:`first_evidence`,
    which reads the card's whole history up to ``until`` as one period; its cards and first
    fault events are those of the period alone."""
    db = new_db("pass")
    mixed_fleet(db, every_minutes=60)
    db.seal_every = timedelta(hours=1)
    rollups.seal(db, at(20) + timedelta(hours=5))  # sealed up to 05:00 of day 20
    periods = [(at(-8), at(38)), (at(2), at(2.3)), (at(19.5), at(25)),  # since: sealed
               (at(20) + timedelta(hours=6), at(26))]  # since after the watermark
    seen = 0
    for since, until in periods:
        for xids in ((), (48, 63)):
            facts = sample_facts(db, since=since, until=until, source=SOURCE_REAL, nodes=None,
                                 fault_xids=xids)
            cards = {(c[0], c[1], c[2]) for c in facts.cards}
            assert facts.evidence_of == cards
            expected = first_evidence(db, base_params(since, until, SOURCE_REAL, None), cards,
                                      xids)
            assert facts.evidence == expected
            seen += len(expected)
            assert all(since <= e[3] <= until for e in facts.events)
            assert [e[3] for e in facts.events] == sorted(e[3] for e in facts.events)
    assert seen > 0  # the fleet's faulty cards have evidence
