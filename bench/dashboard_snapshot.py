"""Benchmark: the prediction-state snapshot behind the evaluator's /metrics (the dashboards).

The snapshot loop runs ``compute_snapshot`` (7/30-day statistics, capability matrix, open
predictions) on a database thread every min(60 s, scan interval); a /metrics scrape only renders
the last snapshot. This measures both on the store of ``bench.rules`` (4,096 cards x 37 days of
5-minute samples, ~43.6 M rows, 400 planted pending predictions), and the alert loop's store
pass (``gpu_health.evaluator.alerts.alert_loop.sync``, every 5 s) with one open alert per
node that has a pending prediction.

Targets: snapshot < 6 s (the refresh stays at every 60 s: ``PredictionState`` waits 10 x a
snapshot's duration before the next one, so it never takes more than a tenth of a database
thread), render < 0.5 s (a scrape), alert sync < 0.1 s (every 5 s).

    python -m bench.dashboard_snapshot            # full run (~43 M rows, a few GB)
    python -m bench.dashboard_snapshot --quick    # 256 cards x 10 days, seconds
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

from prometheus_client import CollectorRegistry, generate_latest

from bench.rules import END, plant_predictions, run_on_fleet
from gpu_health.evaluator.alerts.alert_loop import sync
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.stats.state_collector import PredictionStateCollector, compute_snapshot
from gpu_health.evaluator.store import Database


def _best(runs: int, fn: object) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best, result


def measure(db: Database, rows: int, cards: int) -> bool:
    ruleset = load_ruleset(env={})
    now = END - timedelta(minutes=1)
    plant_predictions(db, ruleset.version, cards, now)
    snapshot_s, snapshot = _best(3, lambda: compute_snapshot(db, now, ruleset=ruleset))
    collector = PredictionStateCollector(lambda: now)
    collector.snapshot = snapshot  # type: ignore[assignment]
    registry = CollectorRegistry()
    registry.register(collector)
    render_s, body = _best(5, lambda: generate_latest(registry))
    assert isinstance(body, bytes)
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    print(f"snapshot: {snapshot_s:.2f} s (target < 6 s), {rows / snapshot_s:,.0f} stored rows/s")
    print(f"render: {render_s * 1000:.0f} ms for {series:,} series, {len(body) / 1e6:.1f} MB "
          "(target < 500 ms)")
    sync(db, now, None, timedelta(hours=1), timedelta(hours=1))  # opens the alerts once
    sync_s, state = _best(5, lambda: sync(db, now, None, timedelta(hours=1),
                                          timedelta(hours=1)))
    print(f"alert sync: {sync_s * 1000:.0f} ms with {len(state.open)} open alerts "  # type: ignore[attr-defined]
          "(target < 100 ms)")
    return snapshot_s < 6 and render_s < 0.5 and sync_s < 0.1


def main(argv: list[str] | None = None) -> int:
    return run_on_fleet(argv, __doc__.splitlines()[0] if __doc__ else None, measure)


if __name__ == "__main__":
    sys.exit(main())
