"""Two worker instances over one store at the same moments (a leader hand-over overlap).

Each worker ticks on its own thread, so each uses its own DuckDB cursor; a barrier starts both
ticks together. The store must end up with one prediction row per card and window and exactly one
written outcome per prediction: deterministic ids + ON CONFLICT DO NOTHING, and compare-and-set
updates (re-run on DuckDB's write-write conflicts).
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from gpu_health.evaluator.worker import TickReport, Worker
from tests.conftest import NewDb
from tests.evaluator.rules_support import at, const, load, quadratic, ruleset, series, step

TICKS = [at(12) + timedelta(minutes=10), at(12) + timedelta(minutes=40),
         at(14) + timedelta(minutes=5), at(19) + timedelta(minutes=5), at(27)]


def test_two_workers_produce_one_row_and_one_outcome_each(new_db: NewDb) -> None:
    db = new_db()
    for gpu in range(8):
        unc = step(13 + gpu, 0, 1) if gpu % 2 == 0 else const(0)
        load(db, series("n1", gpu, f"GPU-{gpu}", start=-8, end=30,
                        corrected=quadratic(2 + gpu / 4, onset=0), uncorrected=unc))
    workers = [Worker(db, ruleset()), Worker(db, ruleset())]
    barrier = threading.Barrier(2)

    def tick(worker: Worker, now: datetime) -> TickReport:
        barrier.wait(timeout=30)
        return worker.tick(now)

    reports: list[TickReport] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for now in TICKS:
            futures = [pool.submit(tick, w, now) for w in workers]
            reports += [f.result(timeout=60) for f in futures]

    table = db.fetchall("SELECT id, gpu_index, t0, window_end, status FROM gpu_health_predictions")
    assert len(table) >= 8
    created = [p.id for r in reports for p in r.predictions]
    assert sorted(created) == sorted(row[0] for row in table)  # each row inserted exactly once
    by_card: dict[int, list[tuple[datetime, datetime]]] = {}
    for _, gpu, t0, end, _ in table:
        by_card.setdefault(gpu, []).append((t0, end))
    for windows in by_card.values():  # never two open windows for one card
        windows.sort()
        assert all(nxt[0] >= prev[1] for prev, nxt in itertools.pairwise(windows))
    for status in ("hit", "miss", "voided"):
        written = sum(r.resolved.get(status, 0) for r in reports)
        assert written == sum(1 for row in table if row[4] == status), status
    assert sum(1 for row in table if row[4] == "hit") == 4
    db.close()
