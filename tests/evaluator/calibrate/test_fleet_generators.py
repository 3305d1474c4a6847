"""The seeded fleets the calibration measurements use say what they claim: a null fleet's faults
do not depend on the cards' correctable history; a bait fleet's bursts each fit in one hour."""

from __future__ import annotations

from collections import Counter

from tests.evaluator.calibrate_support import bait_events, null_events

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
