"""Several evaluators, one truth, end to end: three evaluator processes on one real
PostgreSQL, twelve stand-in exporters, a real Alertmanager (tests/e2e/ha.py).

In file order on one cluster: one leader, every target scraped by exactly one member; the
degrading cards' predictions alert once; kill -9 of the leader: a new leader within 2 x TTL,
the dead member's targets scraped again within two cycles, the alerts neither lost nor doubled;
SIGSTOP of the new leader in the middle of a tick, past its lease, then SIGCONT: the third
member leads once the server ends the stopped one's idle transaction, and the resumed process
wrote nothing a leader writes after it lost the lease. "In the middle of a tick" is made
certain, not hoped for: the test locks the predictions table until the leader's tick waits on
it inside its fenced transaction (``HaCluster.tick_held``).
"""

from __future__ import annotations

import itertools
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.e2e.ha import DEGRADING, MEMBERS, SCRAPE_S, TTL_S, HaCluster, start_ha
from tests.e2e.stack import http
from tests.postgres import PostgresServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
LEADER_TABLES = ("gpu_health_predictions", "gpu_health_alerts", "gpu_health_alert_audit",
                 "gpu_health_sample_days", "gpu_health_window_edges", "gpu_health_rollup_state")


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer
       ) -> Iterator[HaCluster]:
    yield from start_ha(tmp_path_factory.mktemp("ha"), postgres)


def metric(base: str, series: str) -> list[tuple[str, float]]:
    status, body = http("GET", f"{base}/metrics")
    if status != 200 or not isinstance(body, str):
        return []
    return [(line.rsplit(" ", 1)[0], float(line.rsplit(" ", 1)[1]))
            for line in body.splitlines() if line.startswith(series)]


def open_alert_nodes(ha: HaCluster) -> list[str]:
    db = ha.db()
    try:
        return sorted(r[0] for r in db.fetchall(
            "SELECT node_id FROM gpu_health_alerts WHERE closed_at IS NULL"))
    finally:
        db.close()


def at_alertmanager(ha: HaCluster) -> list[str]:
    return sorted(a["labels"]["node"] for a in ha.am_alerts()
                  if a["status"]["state"] == "active")


def max_gaps(ha: HaCluster, since: float) -> dict[str, float]:
    """Per node, the longest time without a scrape from ``since`` to now."""
    now = time.monotonic()
    gaps = {}
    for node, times in ha.fleet.scrape_times().items():
        points = [since] + [t for t in times if t > since] + [now]
        gaps[node] = max(b - a for a, b in itertools.pairwise(points))
    return gaps


def test_one_leader_and_each_target_scraped_by_one_member(ha: HaCluster) -> None:
    holder, token = ha.wait("a leader", ha.leader)
    leaders = {m: metric(base, "gpu_health_evaluator_leader ") for m, base in ha.urls.items()}
    assert {m for m, v in leaders.items() if v and v[0][1] == 1} == {holder}
    for base in ha.urls.values():
        status, body = http("GET", f"{base}/readyz")
        assert status == 200 and f"leader {holder}" in body["leader"] and f"token {token}" in \
            body["leader"]
    start = time.monotonic()
    ha.wait("two scrape cycles", lambda: time.monotonic() - start > 2 * SCRAPE_S + 1)
    counts = {node: len([t for t in times if t > start])
              for node, times in ha.fleet.scrape_times().items()}
    # one member per target: about two scrapes each in two cycles, never three members' worth
    assert all(1 <= n <= 3 for n in counts.values()), counts
    # Every member's /targets names the same scraper per target; only that one shows `up`.
    pages = {m: http("GET", f"{base}/targets")[1]["targets"] for m, base in ha.urls.items()}
    owners = {m: {row["url"]: row["scraped_by"] for row in rows} for m, rows in pages.items()}
    assert len({tuple(sorted(o.items())) for o in owners.values()}) == 1, owners
    for member, rows in pages.items():
        for row in rows:
            if row["scraped_by"] == member:
                assert row["up"] is True and "note" not in row, row
            else:
                assert row["up"] is None and row["scraped_by"] in row["note"], row


def test_the_degrading_cards_alert_once(ha: HaCluster) -> None:
    for node in DEGRADING:
        ha.fleet.jump(node, 60)
    ha.wait("an alert per degrading node at Alertmanager",
            lambda: at_alertmanager(ha) == sorted(DEGRADING), 90)
    assert open_alert_nodes(ha) == sorted(DEGRADING)


def test_kill_9_of_the_leader_in_the_middle_of_a_tick(ha: HaCluster) -> None:
    old, token = ha.wait("a leader", ha.leader)
    with ha.tick_held(old):  # its tick waits inside a transaction that checked its fence
        killed_at = time.monotonic()
        ha.signal(old, signal.SIGKILL)
        ha.procs.items = [p for p in ha.procs.items if p.name != old]  # it is meant to be dead
        _, new_token = ha.wait("a new leader", lambda: (
            lambda lease: lease if lease and lease[0] != old else None)(ha.leader()))
    took = time.monotonic() - killed_at
    assert took <= 2 * TTL_S + 1.0, f"new leader after {took:.1f}s"  # 1 s: this poll's step
    assert new_token > token
    ha.wait("three more scrape cycles", lambda: time.monotonic() - killed_at > 3 * SCRAPE_S + 2)
    gaps = max_gaps(ha, killed_at - SCRAPE_S)
    # no target misses more than two cycles (the dead member's move within one TTL)
    assert max(gaps.values()) <= 3 * SCRAPE_S, gaps
    ha.wait("the alerts re-sent by the new leader", lambda: at_alertmanager(ha) ==
            sorted(DEGRADING), 30)
    ha.fleet.fault(DEGRADING[0])  # the new leader backfills its prediction as a hit
    ha.wait("the hit", lambda: statuses(ha).get(DEGRADING[0]) == "hit", 60)
    _one_row_each(ha)


def test_sigstop_past_the_lease_then_resume(ha: HaCluster) -> None:
    paused, token = ha.wait("a leader", ha.leader)
    with ha.tick_held(paused):  # stopped in the middle of a tick, inside a fenced transaction
        ha.signal(paused, signal.SIGSTOP)
    # its transaction now sits idle, holding the lease row's share lock, until the server ends
    # it (idle_in_transaction_session_timeout = the TTL); only then can another member lead
    took_over = ha.wait("another member to take the lease", lambda: (
        lambda lease: lease if lease and lease[0] != paused else None)(ha.leader()), 30)
    lost_at = datetime.now(UTC)  # the lease was someone else's by now at the latest
    assert took_over[1] > token
    stopped = time.monotonic()
    ha.wait("the pause to last 2 x TTL", lambda: time.monotonic() - stopped > 2 * TTL_S)
    ha.signal(paused, signal.SIGCONT)
    base = ha.urls[paused]
    ha.wait("the resumed member to report itself a follower",
            lambda: metric(base, "gpu_health_evaluator_leader ") == [
                ("gpu_health_evaluator_leader", 0.0)], 30)
    resumed = time.monotonic()
    ha.wait("three worker ticks after the resume", lambda: time.monotonic() - resumed > 9)
    assert ha.writes_by(paused, LEADER_TABLES, lost_at) == []
    assert any(app == f"gpu-health-evaluator/{paused}" and "idle-in-transaction" in text
               for _, app, text in ha.log_entries())
    # ...while the log does show the leader's own writes (the check can see writes)
    assert ha.writes_by(took_over[0], LEADER_TABLES, lost_at) != []
    assert ha.leader() is not None and ha.leader()[0] == took_over[0]  # type: ignore[index]
    ha.wait("the alerts still at Alertmanager", lambda: at_alertmanager(ha) ==
            sorted(DEGRADING), 30)
    _one_row_each(ha)
    assert set(ha.urls) == set(MEMBERS)


def statuses(ha: HaCluster) -> dict[str, str]:
    db = ha.db()
    try:
        return {str(n): str(s) for n, s in db.fetchall(
            "SELECT node_id, status FROM gpu_health_predictions")}
    finally:
        db.close()


def _one_row_each(ha: HaCluster) -> None:
    """No prediction twice, one outcome written once (the fault's hit; the other windows are
    open), one open alert and one 'open' audit entry per degrading node (a hit keeps its
    alert)."""
    db = ha.db()
    try:
        rows = db.fetchall("SELECT node_id, gpu_index, rule_version, t0, status "
                           "FROM gpu_health_predictions")
        audit = db.fetchall("SELECT node_id, count(*) FROM gpu_health_alert_audit "
                            "WHERE action = 'open' GROUP BY node_id ORDER BY 1")
    finally:
        db.close()
    cards = [(r[0], r[1], r[2]) for r in rows]
    assert len(cards) == len(set(cards)) == len(DEGRADING), rows
    assert {(r[0], r[4]) for r in rows} == {(n, "hit" if n == DEGRADING[0] else "pending")
                                            for n in DEGRADING}
    assert audit == [(node, 1) for node in sorted(DEGRADING)]
    assert open_alert_nodes(ha) == sorted(DEGRADING)
    outcome_writes = [line for m in MEMBERS for line in ha.writes_by(
        m, ("UPDATE gpu_health_predictions",), datetime(2000, 1, 1, tzinfo=UTC))]
    assert len(outcome_writes) == 1, outcome_writes  # by one leader, once
