"""The split's bookkeeping query on both engines: how many faults a window that opened before
a part (in the other part) holds, so the report can say what the test part's recall credits
that its precision does not count."""

from __future__ import annotations

from datetime import timedelta

from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest_queries import credited_from_before
from tests.conftest import NewDb
from tests.evaluator.api_support import NOW, RULE_VERSION, add_prediction

SPLIT = NOW - timedelta(days=10)


def test_faults_held_by_a_window_opened_before_the_part(new_db: NewDb) -> None:
    db: Database = new_db()
    day = timedelta(days=1)
    add_prediction(db, "early", "n1", 0, SPLIT - 2 * day)  # opened in the other part
    add_prediction(db, "both-early", "n2", 0, SPLIT - day)
    add_prediction(db, "both-late", "n2", 0, SPLIT + day)  # n2's fault is held by both
    add_prediction(db, "late", "n3", 0, SPLIT + day)  # opened in this part only
    add_prediction(db, "other-version", "n4", 0, SPLIT - day, rule_version="v-other")
    faults = [(n, 0, "GPU-x", SPLIT + 3 * day) for n in ("n1", "n2", "n3", "n4", "n5")]
    assert credited_from_before(db, RULE_VERSION, faults, SPLIT) == 2  # n1 and n2
    assert credited_from_before(db, RULE_VERSION, faults, SPLIT - 3 * day) == 0
    assert credited_from_before(db, RULE_VERSION, [], SPLIT) == 0
