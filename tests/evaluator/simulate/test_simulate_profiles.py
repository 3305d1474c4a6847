"""Simulation: pure, reproducible profiles; the command writes simulated rows only, through the
production write rule, and --purge removes simulated rows only."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.main import main
from gpu_health.evaluator.model import CardKey, Sample
from gpu_health.evaluator.simulate.options import SimulateOptions
from gpu_health.evaluator.simulate.profiles import PROFILES, change_only, readings
from gpu_health.evaluator.simulate.writer import run_simulation
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.cycles import write_cycle
from tests.evaluator.ingest_support import T0, FakeClock, a100
from tests.evaluator.store_support import count_samples

KEY = CardKey("sim-x", 0)
MIN = timedelta(minutes=1)
DAY = timedelta(days=1)


def series(profile: str, days: float = 14, step: timedelta = MIN, seed: int = 0) -> list[Sample]:
    return list(readings(profile, KEY, T0, T0 + days * DAY, step, seed))


def corrected_at(rows: list[Sample], day: float) -> int:
    at = T0 + day * DAY
    value = [r for r in rows if r.sampled_at <= at][-1].counters.ecc_corrected_total
    assert value is not None
    return value


@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_are_reproducible_and_simulated(profile: str) -> None:
    a, b = series(profile, days=3), series(profile, days=3)
    assert a == b and a
    assert {s.key.source for s in a} == {"simulated"}
    assert all(s.sampled_at < T0 + 3 * DAY for s in a)
    assert all(s.counters.retired_pages is None for s in a)  # A100: unknown, never 0
    assert series(profile, days=3, seed=1)[0].gpu_uuid != a[0].gpu_uuid


def test_degrading_passes_the_v1_ratio_test_from_about_day_8() -> None:
    rows = series("degrading", days=12, step=timedelta(minutes=5))

    def passes(day: float) -> bool:
        windows = [corrected_at(rows, day - k) - corrected_at(rows, day - k - 1) for k in (2, 1, 0)]
        week_mean = (corrected_at(rows, day) - corrected_at(rows, day - 7)) / 7
        last = windows[-1]
        return last >= 32 and last >= 1.2 * week_mean and windows[0] < windows[1] < windows[2]

    assert not passes(7.0)
    assert passes(8.0) and passes(9.0)
    fail = [r for r in rows if r.counters.ecc_uncorrected_total]
    assert fail and fail[0].sampled_at == T0 + 10 * DAY


def test_event_profiles() -> None:
    burst = series("burst", days=10)
    assert corrected_at(burst, 5.0) - corrected_at(burst, 4.99) == 400
    assert corrected_at(burst, 9.9) == corrected_at(burst, 5.0)
    unc = series("uncorrectable", days=10)
    assert {r.counters.ecc_uncorrected_total for r in unc if r.sampled_at < T0 + 6 * DAY} == {0}
    assert unc[-1].counters.ecc_uncorrected_total == 2
    swap = series("card_swap", days=10)
    before = {r.gpu_uuid for r in swap if r.sampled_at < T0 + 7 * DAY}
    after = {r.gpu_uuid for r in swap if r.sampled_at >= T0 + 7 * DAY}
    assert len(before) == len(after) == 1 and before != after
    assert corrected_at(swap, 9) < corrected_at(swap, 6)  # counters restart on the new card
    stall = series("stall", days=10)
    assert not [r for r in stall if T0 + 4 * DAY <= r.sampled_at < T0 + 6 * DAY]
    assert [r for r in stall if r.sampled_at >= T0 + 6 * DAY]


def test_change_only_uses_the_write_rule() -> None:
    rows = list(change_only(series("healthy", days=1)))
    gaps = [b.sampled_at - a.sampled_at for a, b in itertools.pairwise(rows)]
    assert max(gaps) == timedelta(minutes=5)  # keepalive rows, never more than 288 a day
    assert len(rows) <= 288 + 5


def options(tmp_path: Path, **kw: object) -> SimulateOptions:
    base: dict[str, object] = {"storage_path": tmp_path / "sim.duckdb", "days": 2.0, "cards": 2,
                               "profiles": ("healthy", "burst"), "end": T0 + 14 * DAY}
    base.update(kw)
    return SimulateOptions(**base)  # type: ignore[arg-type]


@pytest.fixture
def real_db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sim.duckdb"
    db = DuckDBDatabase(path)
    write_cycle(db, [Sample(CardKey("gpu-real", 0), "GPU-r", T0, a100(1))])
    db.close()
    yield path


def test_command_writes_only_simulated_and_purge_removes_only_those(real_db: Path,
                                                                    tmp_path: Path) -> None:
    written = run_simulation(options(tmp_path), clock=FakeClock(), progress=False)
    assert set(written) == {"healthy", "burst"} and all(n > 0 for n in written.values())
    db = DuckDBDatabase(real_db)
    try:
        assert count_samples(db, "simulated") == sum(written.values())
        nodes = db.fetchall("SELECT DISTINCT node_id FROM gpu_health_samples "
                            "WHERE source = 'simulated' ORDER BY 1")
        assert [n[0] for n in nodes] == ["sim-burst", "sim-healthy"]
    finally:
        db.close()
    with pytest.raises(ConfigError, match="--purge"):
        run_simulation(options(tmp_path), progress=False)
    assert run_simulation(options(tmp_path, purge=True))["purged"] == sum(written.values())
    db = DuckDBDatabase(real_db)
    try:
        assert count_samples(db, "simulated") == 0 and count_samples(db, "real") == 1
    finally:
        db.close()


def test_cli_simulate_and_purge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "cli.duckdb"
    assert main(["simulate", "--storage", str(store), "--profiles", "degrading", "--cards", "1",
                 "--days", "1", "--end", "2026-01-15T00:00:00Z"]) == 0
    assert "simulated rows" in capsys.readouterr().out
    assert main(["simulate", "--storage", str(store), "--purge"]) == 0
    assert "purged" in capsys.readouterr().out
    assert main(["simulate", "--storage", str(store), "--profiles", "nope,healthy",
                 "--cards", "0", "--step", "fast", "--end", "yesterday"]) == 2
    err = capsys.readouterr().err
    for text in ("unknown profile 'nope'", "--cards", "--step", "--end"):
        assert text in err
