"""Alert state in the store (evaluator/store/operations/alerts.py), on a real DuckDB file: the three
gates (simulated never alerts, one open alert per node, a handled prediction does not re-open), hits
never close, operator resolve and node removal close with an audit entry."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.operations.alerts import (
    close_removed_nodes,
    closing_alerts,
    mark_sent,
    open_alerts,
    open_new_alerts,
    resolve_alert,
)
from tests.conftest import NewDb
from tests.evaluator.api_support import NOW, add_node, add_prediction
from tests.evaluator.store_support import audit_log

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    database = new_db("alerts")
    add_node(database, "n1", "team-a")
    add_node(database, "n2", None)
    yield database
    database.close()


def test_a_real_prediction_opens_one_alert_per_node_with_an_audit_entry(db: Database) -> None:
    add_prediction(db, "p1", "n1", 0, NOW - HOUR)
    add_prediction(db, "p2", "n1", 3, NOW - HOUR / 2)  # same node, other card
    opened = open_new_alerts(db, NOW)
    assert [(node, pid) for _, node, pid in opened] == [("n1", "p1")]
    assert open_new_alerts(db, NOW + HOUR) == []  # idempotent: never duplicated
    [alert] = open_alerts(db, NOW)
    assert (alert.node_id, alert.tenant, alert.prediction_id, alert.gpu_index) == \
        ("n1", "team-a", "p1", 0)
    assert alert.opened_at == NOW and alert.closed_at is None
    assert alert.node_gpus == (0, 3)
    assert alert.evidence == "24h +40 corrected" and alert.window_days == 7
    [entry] = audit_log(db)
    assert (entry.actor, entry.action, entry.node_id, entry.reason) == \
        ("system", "open", "n1", "prediction p1")


def test_simulated_predictions_never_alert(db: Database) -> None:
    add_prediction(db, "sim", "n1", 0, NOW - HOUR, source="simulated")
    assert open_new_alerts(db, NOW) == []
    assert open_alerts(db, NOW) == []


@pytest.mark.parametrize(("status", "age", "opens"), [
    ("pending", HOUR, True),
    ("hit", 2 * DAY, True),  # a fault inside a live window: still worth an alert
    ("miss", 8 * DAY, False),
    ("voided", 2 * DAY, False),
    ("pending", 8 * DAY, False),  # window over (not yet backfilled): history, not an alert
])
def test_which_predictions_open_an_alert(db: Database, status: str, age: timedelta,
                                         opens: bool) -> None:
    add_prediction(db, "p", "n2", 0, NOW - age, status=status)
    assert bool(open_new_alerts(db, NOW)) is opens


def test_a_hit_does_not_close_the_alert(db: Database) -> None:
    add_prediction(db, "p1", "n1", 0, NOW - HOUR)
    open_new_alerts(db, NOW)
    db.execute("UPDATE gpu_health_predictions SET status = 'hit', outcome = 'unc 0 -> 1' "
               "WHERE id = 'p1'")
    open_new_alerts(db, NOW + HOUR)
    [alert] = open_alerts(db, NOW + HOUR)
    assert alert.prediction_status == "hit" and alert.outcome == "unc 0 -> 1"
    assert alert.closed_at is None


def test_operator_resolve_closes_audits_and_does_not_reopen(db: Database) -> None:
    add_prediction(db, "p1", "n1", 0, NOW - HOUR)
    open_new_alerts(db, NOW)
    add_prediction(db, "p2", "n1", 1, NOW, predicted_at=NOW + HOUR)  # made while open
    closed = resolve_alert(db, "n1", actor="oncall", reason="card swapped, OPS-1",
                           now=NOW + 2 * HOUR)
    assert closed is not None
    assert (closed.closed_by, closed.close_reason, closed.closed_at) == \
        ("oncall", "card swapped, OPS-1", NOW + 2 * HOUR)
    assert resolve_alert(db, "n1", actor="oncall", reason="again", now=NOW + 3 * HOUR) is None
    # Neither the opening prediction nor one made before the close opens a new alert ...
    assert open_new_alerts(db, NOW + 3 * HOUR) == []
    # ... a prediction made after the close does.
    add_prediction(db, "p3", "n1", 2, NOW + 4 * HOUR, predicted_at=NOW + 4 * HOUR)
    assert [pid for _, _, pid in open_new_alerts(db, NOW + 5 * HOUR)] == ["p3"]
    actions = [(e.action, e.actor) for e in audit_log(db, "n1")]
    assert actions == [("open", "system"), ("resolve", "oncall"), ("open", "system")]


def test_closing_alerts_until_every_end_is_acknowledged(db: Database) -> None:
    add_prediction(db, "p1", "n1", 0, NOW - HOUR)
    [(alert_id, _, _)] = open_new_alerts(db, NOW)
    mark_sent(db, {alert_id}, (), NOW)
    assert open_alerts(db, NOW)[0].last_sent_at == NOW
    resolve_alert(db, "n1", actor="oncall", reason="done", now=NOW + HOUR)
    assert open_alerts(db, NOW + HOUR) == []
    [closing] = closing_alerts(db, NOW + HOUR, HOUR)
    assert closing.id == alert_id and closing.closed_at == NOW + HOUR
    assert closing_alerts(db, NOW + 3 * HOUR, HOUR) == []  # beyond the horizon
    mark_sent(db, (), {alert_id}, NOW + HOUR)
    assert closing_alerts(db, NOW + HOUR, HOUR) == []


def test_node_removal_closes_after_the_grace_period(db: Database) -> None:
    add_prediction(db, "p1", "n1", 0, NOW - HOUR)
    add_prediction(db, "p2", "n2", 0, NOW - HOUR)
    open_new_alerts(db, NOW)
    grace = HOUR
    assert close_removed_nodes(db, {"n2"}, grace=grace, now=NOW) == []  # n1 missing from now
    assert close_removed_nodes(db, {"n1", "n2"}, grace=grace, now=NOW + grace / 2) == []
    # It came back, so the clock restarts when it leaves again.
    assert close_removed_nodes(db, {"n2"}, grace=grace, now=NOW + grace) == []
    assert close_removed_nodes(db, {"n2"}, grace=grace, now=NOW + grace * 1.5) == []
    closed = close_removed_nodes(db, {"n2"}, grace=grace, now=NOW + grace * 2)
    assert [node for _, node in closed] == ["n1"]
    [entry] = [e for e in audit_log(db, "n1") if e.action != "open"]
    assert (entry.actor, entry.action) == ("system", "close_node_removed")
    assert "not a recovery" in entry.reason and "1h" in entry.reason
    assert [a.node_id for a in open_alerts(db, NOW + 3 * grace)] == ["n2"]


def test_state_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "restart.duckdb"
    first = DuckDBDatabase(path)
    add_prediction(first, "p1", "n1", 0, NOW - HOUR)
    open_new_alerts(first, NOW)
    first.close()
    second = DuckDBDatabase(path)
    try:
        assert open_new_alerts(second, NOW + HOUR) == []
        assert [a.prediction_id for a in open_alerts(second, NOW + HOUR)] == ["p1"]
    finally:
        second.close()


def test_a_clock_stepped_back_still_opens_the_alert(db: Database) -> None:
    """The evaluator's clock stepping back an hour hid every prediction made in that hour
    (``predicted_at`` "in the future") from the alert, /metrics and check until the clock
    caught up; pending is open whatever the clock says."""
    from gpu_health.evaluator.store.predictions.prediction_state import open_predictions

    add_prediction(db, "p-ahead", "n1", 0, NOW + HOUR / 2)  # made before the step back
    assert [(node, pid) for _, node, pid in open_new_alerts(db, NOW)] == [("n1", "p-ahead")]
    assert [p.node_id for p in open_predictions(db)] == ["n1"]
