"""The seeded fleets the calibration measurements use say what they claim: a null fleet's faults
do not depend on the cards' correctable history; a bait fleet's bursts each fit in one hour; the
weak layer's heat (or PCIe replays) precedes faults on one fleet and is noise on the other,
and lands in the file as the cumulative count the weak signal reads."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.calibrate_support import (
    bait_events,
    card_events,
    heat_as_noise,
    heat_before_faults,
    null_events,
    plant_weak,
    write_profiled_fleet,
)

DAYS = 90


def test_null_fleet_faults_are_independent_of_the_history() -> None:
    cards = [null_events(c, DAYS, seed=5) for c in range(3000)]
    faulty: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for name, events in cards:
        history = name.removesuffix("+fault")
        total[history] += 1
        faulty[history] += name.endswith("+fault")
        faults = [t for t, kind in events if kind == "uncorrected"]
        assert len(faults) == (1 if name.endswith("+fault") else 0)
        assert all(20 <= t <= DAYS - 5 for t in faults)
    assert set(total) == {"noisy", "ramp", "quiet"}
    for history in total:  # half of each history fails, whatever the history
        assert 0.44 < faulty[history] / total[history] < 0.56, (history, faulty, total)


def test_bait_fleet_profiles_and_one_hour_bursts() -> None:
    cards = [bait_events(c, DAYS, seed=3) for c in range(200)]
    profiles = Counter(name for name, _ in cards)
    assert set(profiles) == {"ramp", "sudden", "bursty", "steady", "quiet"}
    for name, events in cards:
        faults = [t for t, kind in events if kind == "uncorrected"]
        assert len(faults) == (1 if name in ("ramp", "sudden") else 0)
        if name != "bursty":
            continue
        times = sorted(t for t, kind in events if kind == "corrected")
        clusters: list[list[float]] = [[times[0]]]
        for t in times[1:]:  # bursts are days apart; background errors a few a week
            if t - clusters[-1][-1] < 2 / 24:
                clusters[-1].append(t)
            else:
                clusters.append([t])
        bursts = [c for c in clusters if len(c) >= 30]
        assert len(bursts) >= DAYS // 8
        for c in bursts:  # one hour holds it all, but for at most two background errors
            assert any(c[j] - c[i] <= 1 / 24 for i in range(3) for j in range(len(c) - 3,
                                                                             len(c))), c
        per_day = Counter(int(t) for t in times)
        assert max(per_day.values()) >= 30 and min(per_day.get(d, 0) for d in range(DAYS)) <= 3


def test_heat_precedes_most_faults_on_the_precursor_fleet_and_none_on_the_noise_fleet() -> None:
    precursor: Counter[str] = Counter()
    noise: Counter[tuple[bool, bool]] = Counter()  # (failed, heated)
    for c in range(3000):
        name, events = card_events(c, DAYS, seed=5)
        fault = [t for t, kind in events if kind == "uncorrected"]
        h = heat_before_faults(c, DAYS, seed=5)
        if name == "ramp":
            precursor["ramp"] += 1
            precursor["ramp heated"] += h is not None
            assert h is None or h[0] == fault[0] - 7  # the week before the fault
        else:
            precursor["other"] += 1
            precursor["other heated"] += h is not None
        noise[(bool(fault), heat_as_noise(c, DAYS, seed=5) is not None)] += 1
    assert 0.86 < precursor["ramp heated"] / precursor["ramp"] < 0.94
    assert 0.03 < precursor["other heated"] / precursor["other"] < 0.07
    for failed in (True, False):  # 30% of either, whatever the faults
        heated = noise[(failed, True)]
        assert 0.26 < heated / (heated + noise[(failed, False)]) < 0.34


@pytest.mark.parametrize(("signal", "column", "quiet", "most_a_day"), [
    ("heat", "hw_thermal_slowdown_us", 0, 2 * 3600e6),  # two hours a day, in microseconds
    ("replays", "pcie_replays", 40, 5000),
    ("nvlink", "nvlink_errors", 0, 24),
])
def test_planted_signal_is_in_the_file_as_a_cumulative_count(
        tmp_path: Path, signal: str, column: str, quiet: int, most_a_day: float) -> None:
    path = tmp_path / "fleet.duckdb"
    write_profiled_fleet(path, card_events, 16, 40, step=timedelta(hours=1), seed=5)
    heated = plant_weak(path, heat_before_faults, 16, 40, seed=5, signal=signal)
    db = DuckDBDatabase(path)
    try:
        rows = db.fetchall(f"""
            SELECT node_id, gpu_index, min({column}), max({column}),
                   count(*) FILTER (WHERE hw_thermal_slowdown_us IS NULL OR pcie_replays IS NULL
                                    OR pcie_link_width IS NULL OR sw_thermal_slowdown_us IS NULL
                                    OR nvlink_errors IS NULL),
                   max(hw_thermal_slowdown_us) + max(pcie_replays) - 40 + max(nvlink_errors)
            FROM gpu_health_samples GROUP BY 1, 2 ORDER BY 1, 2""")
    finally:
        db.close()
    assert len(rows) == 16 and all(r[4] == 0 for r in rows)  # known everywhere, never unknown
    hot = [r for r in rows if r[3] > quiet]
    assert len(hot) == heated
    for node, gpu, low, high, _, both in rows:
        h = heat_before_faults(int(node[-4:]) * 8 + gpu, 40, seed=5)
        assert (high > quiet) == (h is not None) and low == quiet
        assert both == high - quiet  # the other signals stay quiet (0, 40, 0)
        if h is not None:  # its amount a day up to the card's last reading, at most 40 - onset
            assert high - quiet <= (40 - h[0]) * most_a_day + 1
