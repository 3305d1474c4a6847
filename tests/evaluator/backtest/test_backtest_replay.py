"""The replay equals the live worker, and its report's numbers can be checked by hand.

- equivalence: a mixed fleet replayed (a) by :meth:`Worker.tick` at every tick, (b) by
  :func:`replay` skipping what provably changes nothing and extracting features only for the
  cards that can fire, (c) by :func:`replay` at every tick and for every card, (d) through
  :func:`replay_all`: the prediction rows (ids, t0, predicted_at, status, resolved_at, outcome
  text) and rule-version rows are identical;
- versions replayed one after the other in one file equal each replayed alone;
- a synthetic set whose precision and recall are worked out in the docstring of
  ``test_hand_computed_precision_and_recall``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from gpu_health.evaluator.backtest.activity import tick_grid
from gpu_health.evaluator.backtest.backtest_run import replay_all
from gpu_health.evaluator.backtest.replay import replay
from gpu_health.evaluator.backtest.report import build_report
from gpu_health.evaluator.backtest.rulesets import Variant
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.worker import Worker
from tests.evaluator.backtest_support import dump, mixed_fleet, predictions, v1
from tests.evaluator.rules_support import at, const, load, quadratic, series, step

# 6-hour ticks keep the tick-by-tick worker run short; the equivalence does not depend on it
# (also checked at the 30-minute interval of v1 while developing: identical).
RULES = v1(scan_interval_minutes=360)
START, END = at(-8), at(38)


def fleet(tmp_path: Path, name: str) -> Database:
    db = DuckDBDatabase(tmp_path / f"{name}.duckdb")
    mixed_fleet(db, every_minutes=60)
    return db


def test_replay_equals_worker_tick_at_every_tick(tmp_path: Path) -> None:
    worker_db, skip_db, every_db, all_db = (fleet(tmp_path, n) for n in
                                            ("worker", "skip", "every", "all"))
    ticks = tick_grid(START, END, RULES.params.scan_interval)
    worker = Worker(worker_db, RULES, sources=("real",))
    worker.register(ticks[0])
    for now in ticks:
        worker.tick(now)
    skipped = replay(skip_db, RULES, START, END)
    every = replay(every_db, RULES, START, END, skip=False)
    [together] = replay_all(all_db, [RULES], START, END)

    expected = predictions(worker_db)
    assert len(expected) >= 15
    assert {r[14] for r in expected} >= {"hit", "miss", "voided"}
    assert {r[11] for r in expected} == {"strong", "trend"}
    replay(skip_db, RULES, START, END)  # a file replayed again keeps its rows, adds none
    for db in (skip_db, every_db, all_db):
        assert predictions(db) == expected
        assert dump(db, "gpu_health_rule_versions", "version") == \
            dump(worker_db, "gpu_health_rule_versions", "version")
    assert skipped.evaluated_ticks < every.evaluated_ticks == len(ticks)
    assert skipped.backfill_ticks < every.backfill_ticks
    assert every.cards is None
    assert together.cards is not None and together.cards < 12  # the flat card stays out
    for db in (worker_db, skip_db, every_db, all_db):
        db.close()


def test_versions_replayed_together_equal_each_alone(tmp_path: Path) -> None:
    week, month = v1(window_days=7), v1(window_days=30)
    together, alone = fleet(tmp_path, "together"), fleet(tmp_path, "alone")
    both = replay_all(together, [week, month], START, END)
    one = replay_all(alone, [month], START, END)
    rows = predictions(together)
    assert {r[5] for r in rows} == {week.version, month.version}
    assert [r for r in rows if r[5] == month.version] == predictions(alone)
    # each version's report row counts its own predictions only, as if it were alone
    args: dict[str, Any] = {"input_info": {"kind": "test"}, "since": START, "until": END,
                            "generated_at": END, "database": "test"}
    side = build_report(together, [Variant(week), Variant(month)], both, **args)["versions"][1]
    solo = build_report(alone, [Variant(month)], one, **args)["versions"][0]
    for key in ("predictions", "precision", "recall", "faulty_cards", "predicted_faulty_cards",
                "lead_time_days", "by_layer", "by_signal"):
        assert side[key] == solo[key], key
    assert side["stats"]["windows"] == solo["stats"]["windows"]
    together.close()
    alone.close()


def test_hand_computed_precision_and_recall(tmp_path: Path) -> None:
    """Four cards, v1 (7-day window), samples every 30 minutes:

    - A degrades from day 0 and fails at day 12, its last sample: the growth signal predicts it
      once (t0 between day 8 and 9; after the fault its open window blocks the strong signal,
      and after the window nothing is sampled) -> 1 trend prediction, hit; A's first fault is
      inside it -> predicted;
    - B degrades the same way, never fails, sampled until day 15: one growth prediction before
      day 9, window over by day 16 with known counts and no increase -> miss (a second one
      would need a sample after the first window ends: there is none);
    - C never shows a correctable error and fails at day 10, its last sample: the strong signal
      predicts it at t0 = day 10, a window with no sample at all -> voided; C's fault is before
      that window -> missed;
    - D is flat: never predicted.

    precision = hits / (hits + misses) = 1 / 2; recall = predicted faulty cards / faulty
    cards = 1 / 2 (A of A and C); F1 = 0.5. One of the two faults (A's) follows correctable
    errors: recall ceiling 1 / 2. Voided predictions are outside precision.
    """
    db = DuckDBDatabase(tmp_path / "hand.duckdb")
    degrading = quadratic(2, onset=0, base=10)
    load(db,
         series("n1", 0, "GPU-A", start=-8, end=12, corrected=degrading,
                uncorrected=step(12, 0, 1)),
         series("n1", 1, "GPU-B", start=-8, end=15, corrected=degrading, uncorrected=const(0)),
         series("n1", 2, "GPU-C", start=-8, end=10, corrected=const(0),
                uncorrected=step(10, 0, 1)),
         series("n1", 3, "GPU-D", start=-8, end=24, corrected=const(4), uncorrected=const(0)))
    rules = v1(stats_min_matured=1)
    summaries = replay_all(db, [rules], at(-8), at(24))
    report = build_report(db, [Variant(rules)], summaries, input_info={"kind": "test"},
                          since=at(-8), until=at(24), generated_at=at(24), database="hand")
    row = report["versions"][0]
    assert row["predictions"] == {"pending": 0, "hit": 1, "miss": 1, "voided": 1}
    assert (row["precision"], row["recall"], row["f1"]) == (0.5, 0.5, 0.5)
    assert (row["faulty_cards"], row["predicted_faulty_cards"], row["missed_cards"]) == (2, 1, 1)
    assert row["by_layer"] == {"strong": {"voided": 1}, "trend": {"hit": 1, "miss": 1}}
    assert row["stats"]["windows"][0]["missed"][0]["gpu_uuid"] == "GPU-C"
    t0 = db.fetchone("SELECT t0 FROM gpu_health_predictions WHERE status = 'hit'")[0]
    lead = row["lead_time_days"]
    assert lead["n"] == 1 and lead["min"] == lead["max"] == lead["median"]
    assert abs(lead["min"] - (at(12) - t0) / timedelta(days=1)) < 1e-3
    assert 3 < lead["min"] < 4
    base = report["base_rates"]
    assert (base["cards"], base["monitorable_cards"], base["cards_with_fault"]) == (4, 4, 2)
    assert (base["faults_preceded_by_correctable"], base["recall_ceiling_correctable"]) == (1, 0.5)
    assert base["observed_card_days"] == 20 + 23 + 18 + 32
    db.close()
