"""Statistics from shared sample facts equal those computed alone (what calibration relies on
when it measures dozens of versions over one period)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from evaluator.backtest.pipeline import replay_all
from evaluator.store.engines.duckdb import DuckDBDatabase
from evaluator.store.sample_facts import sample_facts
from evaluator.store.stats import raw_stats
from gpu_health.contract import SOURCE_REAL
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
