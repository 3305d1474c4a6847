"""Recall with memory-XID fault events: the definition follows the rule set passed in, and the
response says which one was used (real DuckDB, hand-counted).

Period day 0 .. day 10, hourly samples, every card has known counters unless said otherwise:
  n1/0 XID 48 0 (day -5, before the period) -> 1 (day 5); 7-day prediction at day 3 -> predicted
  n1/1 XID 94 event day 4, ECC fault day 6; 7-day prediction at day 5 -> ECC-only: predicted;
       with XIDs its FIRST fault is day 4, before the prediction -> missed
  n1/2 XID 13 increase (not a memory XID)       n1/3 XID 48 first row already 2 (no base)
  n1/4 XID 48 drop 3 -> 0 (exporter restart)    n1/5 XID 48 event on day 12 (after the period)
  n2/0 XID 48 event but no known counter at all: not monitorable
  n1/6 flat; 20 matured 7-day predictions so the ratios are shown
ECC-only: faulty {n1/1}, recall 1/1. With v2-ecc-xid: faulty {n1/0, n1/1}, recall 1/2.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpu_health.evaluator.model import XidKey, XidSample
from gpu_health.evaluator.stats.document import prediction_stats
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.readings.cycles import write_cycle
from tests.conftest import NewDb
from tests.evaluator.rules_support import (
    at,
    const,
    insert_prediction,
    load,
    ruleset,
    ruleset_v2,
    series,
    step,
)

NOW, SINCE = at(10), at(0)
MEMORY = ["ecc_uncorrected", "xid:48", "xid:63", "xid:64", "xid:94", "xid:95"]


def xids(db: Database, node: str, gpu: int, xid: int, *points: tuple[float, int],
         source: str = "real") -> None:
    write_cycle(db, [], xids=[XidSample(XidKey(node, gpu, source, xid), f"GPU-{node}-{gpu}",
                                        at(d), n) for d, n in points])


def build(db: Database, source: str = "real") -> None:
    def card(node: str, gpu: int, **kw: Any) -> None:
        curves = {"uncorrected": const(0), "corrected": const(3), **kw}
        load(db, series(node, gpu, f"GPU-{node}-{gpu}", start=0, end=10, every_minutes=60,
                        source=source, **curves))

    for gpu in (0, 2, 3, 4, 5, 6):
        card("n1", gpu)
    card("n1", 1, uncorrected=step(6, 0, 1))
    card("n2", 0, uncorrected=const(None), corrected=const(None))
    xids(db, "n1", 0, 48, (-5, 0), (5, 1), source=source)
    xids(db, "n1", 1, 94, (0, 0), (4, 2), source=source)
    xids(db, "n1", 2, 13, (0, 0), (5, 4), source=source)
    xids(db, "n1", 3, 48, (5, 2), source=source)
    xids(db, "n1", 4, 48, (0, 3), (5, 0), source=source)
    xids(db, "n1", 5, 48, (0, 0), (12, 1), source=source)
    xids(db, "n2", 0, 48, (0, 0), (5, 1), source=source)

    def predict(pid: str, gpu: int, t0: float, status: str) -> None:
        insert_prediction(db, pid=f"{source}-{pid}", node="n1", gpu=gpu, uuid=f"GPU-n1-{gpu}",
                          t0=at(t0), status=status, source=source)

    predict("a", 0, 3, "pending")
    predict("b", 1, 5, "hit")
    for i in range(20):
        predict(f"f{i}", 6, 0.2 + i * 0.3, "miss" if i % 2 else "hit")


@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    store = new_db()
    build(store)
    yield store
    store.close()


def week(db: Database, **kw: Any) -> dict[str, Any]:
    window: dict[str, Any] = prediction_stats(db, now=NOW, since=SINCE, **kw)["windows"][0]
    return window


def test_without_a_rule_set_faults_are_ecc_only(db: Database) -> None:
    w7 = week(db)
    assert w7["fault_events"] == ["ecc_uncorrected"]
    assert (w7["faulty_cards"], w7["predicted_faulty_cards"], w7["recall"]) == (1, 1, 1.0)
    assert week(db, ruleset=ruleset()) == w7  # v1-ecc-growth: the same definition


def test_v2_counts_memory_xid_events_and_their_first_fault(db: Database) -> None:
    w7 = week(db, ruleset=ruleset_v2())
    assert w7["fault_events"] == MEMORY
    assert (w7["faulty_cards"], w7["predicted_faulty_cards"], w7["missed_cards"]) == (2, 1, 1)
    assert w7["recall"] == pytest.approx(0.5)
    assert w7["missed"] == [{"node_id": "n1", "gpu_index": 1, "gpu_uuid": "GPU-n1-1",
                             "first_fault_at": "2026-01-05T00:00:00Z"}]
    # precision is the frozen per-prediction outcomes, whatever the definition
    assert w7["precision"] == week(db)["precision"] == pytest.approx(11 / 21)
    assert w7["monitorable_cards"] == 7 and w7["exposure_card_days"] == pytest.approx(70)
    assert prediction_stats(db, now=NOW, since=SINCE,
                            ruleset=ruleset_v2())["windows"][1]["fault_events"] == MEMORY


def test_an_overridden_definition_is_used_and_reported(db: Database) -> None:
    w7 = week(db, ruleset=ruleset_v2(fault_xids=[94]))
    assert w7["fault_events"] == ["ecc_uncorrected", "xid:94"]
    assert (w7["faulty_cards"], w7["predicted_faulty_cards"]) == (1, 0)  # n1/1 from day 4


def test_node_filter_and_sources_apply_to_xid_events(db: Database) -> None:
    only_n2 = week(db, ruleset=ruleset_v2(), nodes=frozenset({"n2"}))
    assert only_n2["faulty_cards"] == 0 and only_n2["monitorable_cards"] == 0
    real = week(db, ruleset=ruleset_v2())
    build(db, source="simulated")
    assert week(db, ruleset=ruleset_v2()) == real
    sim = week(db, ruleset=ruleset_v2(), source="simulated")
    assert (sim["faulty_cards"], sim["predicted_faulty_cards"]) == (2, 1)


def test_a_period_starting_after_the_event_does_not_count_it(db: Database) -> None:
    late = prediction_stats(db, now=NOW, since=at(5.5), ruleset=ruleset_v2())["windows"][0]
    # only n1/1's ECC fault (day 6) lies in the period, and the day-5 prediction held it
    assert (late["faulty_cards"], late["predicted_faulty_cards"]) == (1, 1)
    assert late["missed"] == []
