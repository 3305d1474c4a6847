"""prediction_stats against a hand-counted store (real DuckDB).

Period: day 0 .. day 10 (hourly samples). Faulty cards (first uncorrectable increase):
  n2/0 day 2 (never predicted)            -> missed in both windows
  n1/2 day 4 (predicted at 4.5, after it) -> missed: only the FIRST fault counts
  n1/0 day 5 (7-day prediction at day 3)  -> predicted
  n1/1 day 6 (7-day prediction at day 5)  -> predicted
  n1/3 day 8 (30-day prediction at day 1) -> predicted for 30 only
7-day predictions with t0 in the period: 15 hit, 10 miss, 3 pending, 2 voided -> precision 0.6;
recall 2 / 5 = 0.4; F1 0.48. Monitorable: 7 cards (an all-unknown card is not), exposure 68.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from gpu_health.errors import GpuHealthError
from gpu_health.evaluator.stats.document import DISCLAIMER, default_since, prediction_stats
from gpu_health.evaluator.store import Database
from tests.conftest import NewDb
from tests.evaluator.rules_support import (
    at,
    const,
    insert_prediction,
    load,
    ruleset,
    series,
    step,
)

NOW = at(10)
SINCE = at(0)
WINDOW_KEYS = {
    "window_days", "rule_versions", "predictions", "matured", "precision", "recall", "f1",
    "monitorable_cards", "faulty_cards", "predicted_faulty_cards", "missed_cards", "missed",
    "exposure_card_days", "observed_days", "required_days", "required_matured", "sufficient",
    "note", "fault_events", "by_class", "precision_ci95", "recall_ci95",
}
CLASS_KEYS = {"predictions", "matured", "precision", "recall", "f1", "faulty_cards",
              "predicted_faulty_cards", "missed_cards", "missed", "sufficient", "note",
              "precision_ci95", "recall_ci95"}


def build(db: Database, *, source: str = "real") -> None:
    def card(node: str, gpu: int, start: float = 0, **kw: Any) -> None:
        load(db, series(node, gpu, f"GPU-{node}-{gpu}", start=start, end=10, every_minutes=60,
                        source=source, **kw))

    card("n1", 0, uncorrected=step(5, 0, 1), corrected=const(3))
    card("n1", 1, uncorrected=step(6, 0, 1), corrected=const(3))
    card("n1", 2, uncorrected=lambda t: 0 if t < 4 else (1 if t < 7 else 2), corrected=const(3))
    card("n1", 3, uncorrected=step(8, 0, 1), corrected=const(3))
    card("n1", 4, uncorrected=const(0))  # Kunlunxin-like: still monitorable
    card("n1", 5)  # every counter unknown: not monitorable
    card("n2", 0, uncorrected=step(2, 0, 3), corrected=const(3))
    card("n2", 1, start=2, corrected=const(5))

    def predict(pid: str, node: str, gpu: int, t0: float, status: str, window: int = 7) -> None:
        insert_prediction(db, pid=f"{source}-{pid}", node=node, gpu=gpu,
                          uuid=f"GPU-{node}-{gpu}", t0=at(t0), window_days=window,
                          status=status, source=source)

    predict("a", "n1", 0, 3, "hit")
    predict("b", "n1", 1, 5, "hit")
    predict("c", "n1", 2, 4.5, "hit")
    predict("d", "n1", 3, 1, "pending", window=30)
    predict("old", "n1", 0, -1, "hit")  # t0 before the period: not counted
    fillers = ["hit"] * 12 + ["miss"] * 10 + ["pending"] * 3 + ["voided"] * 2
    for i, status in enumerate(fillers):
        predict(f"f{i}", "n1", 6, 0.1 + i * 0.3, status)


@pytest.fixture
def db(new_db: NewDb) -> Database:
    store = new_db()
    build(store)
    return store


def test_hand_counted_statistics(db: Database) -> None:
    stats = prediction_stats(db, now=NOW, since=SINCE)
    assert stats["source"] == "real" and stats["disclaimer"] == DISCLAIMER
    assert (stats["since"], stats["until"]) == ("2026-01-01T00:00:00Z", "2026-01-11T00:00:00Z")
    assert stats["generated_at"] == "2026-01-11T00:00:00Z"
    w7, w30 = stats["windows"]
    assert set(w7) == set(w30) == WINDOW_KEYS
    assert w7["window_days"] == 7 and w30["window_days"] == 30
    assert w7["predictions"] == {"pending": 3, "hit": 15, "miss": 10, "voided": 2}
    assert w7["matured"] == 25 and w7["sufficient"] is True
    assert w7["precision"] == pytest.approx(0.6)
    assert (w7["faulty_cards"], w7["predicted_faulty_cards"], w7["missed_cards"]) == (5, 2, 3)
    assert w7["recall"] == pytest.approx(0.4)
    assert w7["f1"] == pytest.approx(0.48)
    # Wilson 95%: 15 hits of 25 matured, 2 predicted of 5 faulty cards
    assert w7["precision_ci95"] == [0.407395, 0.765967]
    assert w7["recall_ci95"] == pytest.approx([0.117621, 0.769276], abs=1e-6)
    assert w30["precision_ci95"] is None and w30["recall_ci95"] is None  # null with the ratio
    assert [(m["node_id"], m["gpu_index"], m["first_fault_at"]) for m in w7["missed"]] == [
        ("n2", 0, "2026-01-03T00:00:00Z"),
        ("n1", 2, "2026-01-05T00:00:00Z"),
        ("n1", 3, "2026-01-09T00:00:00Z"),
    ]
    assert w7["missed"][0]["gpu_uuid"] == "GPU-n2-0"
    assert w7["monitorable_cards"] == 7
    assert w7["exposure_card_days"] == pytest.approx(68)
    assert w7["observed_days"] == pytest.approx(10)
    assert (w7["required_days"], w7["required_matured"]) == (8, 20)
    assert w7["note"] == "observed 10.0 days (gate 8), 25 matured (gate 20)"
    assert w7["rule_versions"] == ["v1-ecc-growth"]
    assert w7["fault_events"] == w30["fault_events"] == ["ecc_uncorrected"]  # no rule set


def test_hand_counted_classes(db: Database) -> None:
    w7 = prediction_stats(db, now=NOW, since=SINCE)["windows"][0]
    first, repeat = w7["by_class"]["first_fault"], w7["by_class"]["repeat"]
    assert set(first) == set(repeat) == CLASS_KEYS
    # "c" (n1/2, t0 day 4.5) came after the card's first uncorrectable error (day 4): repeat.
    # Every other prediction was made on a card with no fault at or before its t0.
    assert repeat["predictions"] == {"pending": 0, "hit": 1, "miss": 0, "voided": 0}
    assert first["predictions"] == {"pending": 3, "hit": 14, "miss": 10, "voided": 2}
    assert first["matured"] == 24 and first["sufficient"] is True
    assert first["precision"] == pytest.approx(14 / 24)
    # all five faults are first faults; n1/0 and n1/1 were warned of before, n1/2 was not
    assert (first["faulty_cards"], first["predicted_faulty_cards"], first["missed_cards"]) == (
        5, 2, 3)
    assert first["recall"] == pytest.approx(0.4)
    assert first["f1"] == pytest.approx(2 * (14 / 24) * 0.4 / (14 / 24 + 0.4))
    assert repeat["matured"] == 1 and repeat["sufficient"] is False  # gates apply per class
    assert repeat["precision"] is None and repeat["recall"] is None and repeat["f1"] is None
    assert repeat["faulty_cards"] == 0 and "null (not 0%)" in repeat["note"]
    # the totals are unchanged by the split
    assert w7["precision"] == pytest.approx(0.6) and w7["recall"] == pytest.approx(0.4)


def test_a_fault_exactly_at_t0_is_not_inside_the_window(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=10, every_minutes=60,
                    uncorrected=step(5, 0, 1), corrected=const(1)))
    load(db, series("n1", 1, "GPU-b", start=0, end=10, every_minutes=60,
                    uncorrected=step(5, 0, 1), corrected=const(1)))
    insert_prediction(db, pid="at", node="n1", gpu=0, uuid="GPU-a", t0=at(5), status="hit")
    insert_prediction(db, pid="before", node="n1", gpu=1, uuid="GPU-b",
                      t0=at(5) - timedelta(microseconds=1), status="hit")
    lenient = ruleset(stats_min_matured=1)
    w7 = prediction_stats(db, now=NOW, since=SINCE, ruleset=lenient)["windows"][0]
    first, repeat = w7["by_class"]["first_fault"], w7["by_class"]["repeat"]
    # window (t0, t0 + 7d]: the fault at t0 itself is not predicted by that prediction, and the
    # prediction is a repeat (the fault is observed at its t0); one microsecond earlier it is
    # a first-fault warning that predicted it
    assert [m["gpu_index"] for m in w7["missed"]] == [0]
    assert (first["predicted_faulty_cards"], first["missed_cards"]) == (1, 1)
    assert first["predictions"]["hit"] == 1 and repeat["predictions"]["hit"] == 1
    assert first["recall"] == pytest.approx(0.5)


def test_thirty_day_window_is_reported_side_by_side_with_nulls(db: Database) -> None:
    w30 = prediction_stats(db, now=NOW, since=SINCE)["windows"][1]
    assert w30["predictions"] == {"pending": 1, "hit": 0, "miss": 0, "voided": 0}
    assert w30["matured"] == 0 and w30["sufficient"] is False
    assert w30["precision"] is None and w30["recall"] is None and w30["f1"] is None
    assert (w30["faulty_cards"], w30["predicted_faulty_cards"], w30["missed_cards"]) == (5, 1, 4)
    assert w30["note"].startswith("observed 10.0 days (gate 8), 0 matured (gate 20)")
    assert "null (not 0%)" in w30["note"]


def test_thresholds_come_from_the_rule_set(db: Database) -> None:
    strict = ruleset(stats_min_observed_days=11)
    w7 = prediction_stats(db, now=NOW, since=SINCE, ruleset=strict)["windows"][0]
    assert w7["sufficient"] is False and w7["precision"] is None and w7["recall"] is None
    assert w7["required_days"] == 11
    assert w7["note"].startswith("observed 10.0 days (gate 11), 25 matured (gate 20)")
    lenient = ruleset(stats_min_matured=1)
    w30 = prediction_stats(db, now=NOW, since=SINCE, ruleset=lenient)["windows"][1]
    assert w30["sufficient"] is False  # 0 matured is still below 1


def test_too_few_matured_predictions_gives_null_not_zero(new_db: NewDb) -> None:
    db = new_db()
    load(db, series("n1", 0, "GPU-a", start=0, end=10, every_minutes=60,
                    uncorrected=step(5, 0, 1)))
    for i in range(19):
        insert_prediction(db, pid=f"m{i}", node="n1", gpu=1, uuid="GPU-b", t0=at(1),
                          status="miss")
    w7 = prediction_stats(db, now=NOW, since=SINCE)["windows"][0]
    assert w7["matured"] == 19 and w7["precision"] is None and w7["recall"] is None
    assert w7["note"].startswith("observed 10.0 days (gate 8), 19 matured (gate 20)")
    insert_prediction(db, pid="m19", node="n1", gpu=1, uuid="GPU-b", t0=at(1), status="miss")
    w7 = prediction_stats(db, now=NOW, since=SINCE)["windows"][0]
    assert w7["precision"] == 0.0 and w7["recall"] == 0.0 and w7["f1"] == 0.0  # a real zero


def test_empty_store_has_unknown_observed_days(new_db: NewDb) -> None:
    db = new_db()
    w7 = prediction_stats(db, now=NOW)["windows"][0]
    assert w7["observed_days"] is None and w7["precision"] is None
    assert w7["monitorable_cards"] == 0 and w7["exposure_card_days"] == 0
    assert w7["note"].startswith("observed unknown (no samples) (gate 8), 0 matured (gate 20)")


def test_nodes_filter_limits_every_number(db: Database) -> None:
    w7 = prediction_stats(db, now=NOW, since=SINCE, nodes=frozenset({"n1"}))["windows"][0]
    assert (w7["faulty_cards"], w7["predicted_faulty_cards"]) == (4, 2)
    assert w7["recall"] == pytest.approx(0.5)
    assert w7["monitorable_cards"] == 5 and w7["exposure_card_days"] == pytest.approx(50)
    assert all(m["node_id"] == "n1" for m in w7["missed"])
    only_n2 = prediction_stats(db, now=NOW, since=SINCE, nodes=frozenset({"n2"}))["windows"][0]
    assert only_n2["predictions"] == {"pending": 0, "hit": 0, "miss": 0, "voided": 0}
    assert only_n2["faulty_cards"] == 1 and only_n2["monitorable_cards"] == 2
    none = prediction_stats(db, now=NOW, since=SINCE, nodes=frozenset())["windows"][0]
    assert none["monitorable_cards"] == 0 and none["matured"] == 0


def test_rule_version_counts_only_that_versions_predictions(db: Database) -> None:
    # Another version predicted n2/0's fault (day 2) and missed twice: a backtest file holds
    # versions side by side, and each must be measured on its own predictions.
    for pid, t0, status in (("o1", 1.5, "hit"), ("o2", 3, "miss"), ("o3", 4, "miss")):
        insert_prediction(db, pid=pid, node="n2", gpu=0, uuid="GPU-n2-0", t0=at(t0),
                          status=status, version="v9-other")
    every = prediction_stats(db, now=NOW, since=SINCE)["windows"][0]
    assert every["predictions"] == {"pending": 3, "hit": 16, "miss": 12, "voided": 2}
    assert every["predicted_faulty_cards"] == 3
    assert every["rule_versions"] == ["v1-ecc-growth", "v9-other"]
    v1 = prediction_stats(db, now=NOW, since=SINCE, rule_version="v1-ecc-growth")["windows"][0]
    assert v1["predictions"] == {"pending": 3, "hit": 15, "miss": 10, "voided": 2}
    assert (v1["faulty_cards"], v1["predicted_faulty_cards"]) == (5, 2)
    assert v1["rule_versions"] == ["v1-ecc-growth"]
    other = prediction_stats(db, now=NOW, since=SINCE, rule_version="v9-other")["windows"][0]
    assert other["predictions"] == {"pending": 0, "hit": 1, "miss": 2, "voided": 0}
    assert (other["faulty_cards"], other["predicted_faulty_cards"]) == (5, 1)
    assert [m["node_id"] for m in other["missed"]] == ["n1", "n1", "n1", "n1"]


def test_simulated_data_never_reaches_real_stats(db: Database) -> None:
    before = prediction_stats(db, now=NOW, since=SINCE)
    build(db, source="simulated")
    assert prediction_stats(db, now=NOW, since=SINCE) == before
    sim = prediction_stats(db, now=NOW, since=SINCE, source="simulated")
    assert sim["source"] == "simulated"
    assert sim["windows"][0]["predictions"] == before["windows"][0]["predictions"]


def test_since_defaults_to_the_retention_period(db: Database) -> None:
    stats = prediction_stats(db, now=NOW, retention_days=5)
    assert stats["since"] == "2026-01-06T00:00:00Z"
    w7 = stats["windows"][0]
    assert w7["observed_days"] == pytest.approx(5)
    # n1/1's first increase in the period is at day 6; n1/3's at day 8.
    assert w7["faulty_cards"] == 3


def test_unknown_source_is_refused(db: Database) -> None:
    with pytest.raises(GpuHealthError, match="unknown source"):
        prediction_stats(db, now=NOW, source="all")


def test_the_default_period_starts_at_a_midnight_inside_the_retention() -> None:
    """Whole sealed days: the first UTC midnight at or after now - retention, never
    after now; a caller's since is not rounded (prediction_stats keeps it)."""
    now = datetime(2026, 1, 10, 12, 30, tzinfo=UTC)
    assert default_since(now, 180) == datetime(2025, 7, 15, tzinfo=UTC)
    assert default_since(now.replace(hour=0, minute=0), 2) == datetime(2026, 1, 8, tzinfo=UTC)
    east = now.astimezone(timezone(timedelta(hours=8)))  # the same instant, another offset
    assert default_since(east, 180) == datetime(2025, 7, 15, tzinfo=UTC)
    assert default_since(now, 0) == now
