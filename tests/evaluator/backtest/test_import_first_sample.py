"""A history import whose ``--since`` is exactly a series' first sample, against a real
VictoriaMetrics (Debian's ``victoria-metrics``; the real Prometheus case is in
test_backtest_prometheus.py, whose ``since`` is its series' first sample too). VictoriaMetrics
answers a range query ending at a series' first sample with nothing: every counter that then
stayed constant was never read (80% of uncorrectable readings null on a planted fleet)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_health.clock import from_naive_utc
from gpu_health.evaluator.backtest.prometheus import PrometheusRange, import_prometheus
from gpu_health.evaluator.ingest.prometheus.metricsets import OURS
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.ingest.prometheus.servers import VM, VM_MISSING, loaded_victoria_metrics

pytestmark = pytest.mark.skipif(VM is None, reason=VM_MISSING)

STEP = timedelta(minutes=1)
T0 = datetime.fromtimestamp((int(time.time()) // 86400 - 4) * 86400, UTC)
STEPS = 240


def _lines() -> list[dict[str, Any]]:
    stamps = [int((T0 + k * STEP).timestamp() * 1000) for k in range(STEPS)]
    lines: list[dict[str, Any]] = []
    for gpu in (0, 1):
        labels = {"node": "n1", "gpu": str(gpu), "uuid": f"GPU-{gpu}", "vendor": "nvidia"}
        for name, values in (
                ("gpu_health_ecc_uncorrected_total", [0] * STEPS),  # constant: never a change
                ("gpu_health_ecc_corrected_total", [k // 60 for k in range(STEPS)]),
                ("gpu_health_remapped_rows_pending", [0] * STEPS)):
            metric: dict[str, str] = {"__name__": name, **labels}
            lines.append({"metric": metric, "values": values, "timestamps": stamps})
    return lines


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from loaded_victoria_metrics(tmp_path_factory, _lines())


def test_constant_counters_are_read_from_the_first_sample(vm: str, tmp_path: Path) -> None:
    db = DuckDBDatabase(tmp_path / "bt.duckdb")
    src = PrometheusRange(url=vm, metrics=OURS, since=T0, until=T0 + (STEPS - 1) * STEP,
                          step=STEP)
    stats = asyncio.run(import_prometheus(db, src, timedelta(minutes=5)))
    rows = db.fetchall("SELECT gpu_index, sampled_at, ecc_uncorrected_total, "
                       "ecc_corrected_total, remapped_rows_pending FROM gpu_health_samples "
                       "ORDER BY 1, 2")
    first = {int(r[0]): (from_naive_utc(r[1]), *r[2:]) for r in reversed(rows)}
    assert first == {0: (T0, 0, 0, 0), 1: (T0, 0, 0, 0)}  # read at since, not left unknown
    assert all(r[2] == 0 and r[4] == 0 for r in rows)  # and never unknown afterwards
    # what could not be read is counted and said: two counters this fleet never exported
    assert set(stats.absent) == {"retired_pages", "remapped_rows_failure"}
    assert stats.absent["retired_pages"] == stats.changes
    assert f"retired_pages: no value at {stats.changes} of {stats.changes}" in stats.unread()
    db.close()
