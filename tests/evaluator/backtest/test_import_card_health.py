"""The card's health beyond memory imported from a real VictoriaMetrics with our exporter's
names (the change-point path a history import and the first start take): the link width, the
thermal slowdown in seconds (stored as whole microseconds), the fabric state and status; the
power-cap reason, which the store does not keep, read and left out; every keep-alive row
carries the details of the reading it repeats."""

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
STEPS = 120
HOT = range(30, 60)  # the steps at which the card's clocks are held down for heat


def hw_thermal(k: int) -> float:
    """Seconds of hardware thermal slowdown at step k: 45.5 s more each hot minute."""
    return 45.5 * len([h for h in HOT if h < k])


def _lines() -> list[dict[str, Any]]:
    stamps = [int((T0 + k * STEP).timestamp() * 1000) for k in range(STEPS)]
    labels = {"node": "n1", "gpu": "0", "uuid": "GPU-0", "vendor": "nvidia"}
    series: list[tuple[str, dict[str, str], list[Any]]] = [
        ("gpu_health_ecc_corrected_total", {}, [3] * STEPS),
        ("gpu_health_pcie_link_width", {}, [16 if k < 90 else 8 for k in range(STEPS)]),
        ("gpu_health_pcie_link_width_max", {}, [16] * STEPS),
        ("gpu_health_clock_slowdown_seconds_total", {"reason": "hw_thermal_slowdown"},
         [hw_thermal(k) for k in range(STEPS)]),
        ("gpu_health_clock_slowdown_seconds_total", {"reason": "sw_power_cap"},
         [0.75 * k for k in range(STEPS)]),  # every step: never a change the store sees
        ("gpu_health_fabric_status_success", {}, [1] * STEPS),
        ("gpu_health_pcie_replays_total", {}, [40 if k < 100 else 67 for k in range(STEPS)]),
        ("gpu_health_nvlink_card_errors_total", {}, [0 if k < 110 else 5 for k in range(STEPS)]),
        ("gpu_health_nvlink_errors_total", {"link": "2", "counter": "crc"},  # read, not kept
         [0 if k < 110 else 5 for k in range(STEPS)]),
        *(("gpu_health_fabric_state", {"state": state},
           [int(state == ("in_progress" if k < 10 else "completed")) for k in range(STEPS)])
          for state in ("not_supported", "not_started", "in_progress", "completed")),
    ]
    return [{"metric": {"__name__": name, **labels, **extra}, "values": values,
             "timestamps": stamps} for name, extra, values in series]


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from loaded_victoria_metrics(tmp_path_factory, _lines())


def test_details_are_imported_as_the_live_write_rule_stores_them(vm: str,
                                                                 tmp_path: Path) -> None:
    db = DuckDBDatabase(tmp_path / "bt.duckdb")
    src = PrometheusRange(url=vm, metrics=OURS, since=T0, until=T0 + (STEPS - 1) * STEP,
                          step=STEP)
    asyncio.run(import_prometheus(db, src, timedelta(minutes=5)))
    rows = [(from_naive_utc(r[0]), *r[1:]) for r in db.fetchall(
        "SELECT sampled_at, ecc_corrected_total, pcie_link_width, pcie_link_width_max, "
        "hw_thermal_slowdown_us, sw_thermal_slowdown_us, fabric_status_success, fabric_state, "
        "pcie_replays, nvlink_errors FROM gpu_health_samples ORDER BY 1")]
    db.close()
    steps = [int((at - T0) / STEP) for at, *_ in rows]
    # a row at the first reading, at every change (each hot minute, the link's drop, the
    # NVLink errors) and a keep-alive row every 5 minutes in between
    assert steps[0] == 0 and set(range(31, 61)) <= set(steps)
    assert {10, 90, 100, 110} <= set(steps)
    assert 0 < len([s for s in steps if s < 30]) <= 7
    for (_, corrected, width, width_max, hw, sw, fabric, state, replays, nvlink), k in zip(
            rows, steps, strict=True):
        assert (corrected, width_max, fabric) == (3, 16, 1)
        assert replays == (40 if k < 100 else 67)
        assert nvlink == (0 if k < 110 else 5)
        assert state == (2 if k < 10 else 3)  # in_progress, then completed (FABRIC_STATES)
        assert width == (16 if k < 90 else 8)
        assert hw == round(hw_thermal(k) * 1e6)  # 45.5 s a hot minute, in microseconds
        assert sw is None  # no series: unknown, never 0
