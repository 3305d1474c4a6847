"""The events import streamed from the file: the same rows as the in-memory histories, memory
that does not grow with the rows, and a file that changes between its two reads refused."""

from __future__ import annotations

import random
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.backtest import events as events_module
from gpu_health.evaluator.backtest.card_history import card_histories
from gpu_health.evaluator.backtest.events import CALCHAS, EventFile, iter_events, parse_events
from gpu_health.evaluator.backtest.events_import import Observation, write_events
from gpu_health.evaluator.backtest.history import write_histories
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.shared import require_shared

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HEADER = "Datacenter,Server,Name,Time,EccType\n"
HOW = Observation(step=timedelta(minutes=1), lead_in=timedelta(minutes=1),
                  observe_after=timedelta(days=2))
KEEP = timedelta(minutes=5)
SAMPLES = ("SELECT node_id, gpu_index, gpu_uuid, source, sampled_at, ecc_uncorrected_total, "
           "ecc_corrected_total, retired_pages, remapped_rows_pending, remapped_rows_failure "
           "FROM gpu_health_samples ORDER BY node_id, gpu_index, sampled_at")


def events_csv(path: Path, rows: int, cards: int, seed: int, days: float = 10,
               quantum: int = 1) -> Path:
    """A file in no particular order: Unix and ISO times (whole multiples of ``quantum``
    seconds), three types, some cards hot."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(HEADER)
        for _ in range(rows):
            c = min(cards - 1, int(cards * rng.random() ** 2))
            at = T0 + timedelta(seconds=rng.randrange(int(days * 86400)) // quantum * quantum)
            when = str(int(at.timestamp())) if rng.random() < 0.5 else \
                at.isoformat().replace("+00:00", "Z")
            kind = rng.choice(("CE", "CE", "CE", "UER", "UEO"))
            fh.write(f"DC{c % 3},10.0.{c // 8}.1,DSA{c % 8},{when},{kind}\n")
    return path


def in_memory(db: DuckDBDatabase, path: Path, file: EventFile) -> tuple[int, int]:
    with path.open(encoding="utf-8", newline="") as fh:
        histories, _ = card_histories(iter_events(fh, CALCHAS, str(path), file), step=HOW.step,
                                      lead_in=HOW.lead_in, observe_after=HOW.observe_after)
    return write_histories(db, histories, step=HOW.step, keepalive=KEEP), len(histories)


def streamed(db: DuckDBDatabase, path: Path, file: EventFile, chunk: int) -> tuple[int, int]:
    with path.open(encoding="utf-8", newline="") as fh:
        written = write_events(db, iter_events(fh, CALCHAS, str(path), file), file, HOW,
                               keepalive=KEEP, chunk=chunk)
    return written.rows, written.cards


def assert_same_rows(tmp_path: Path, path: Path, chunk: int) -> int:
    with path.open(encoding="utf-8", newline="") as fh:
        file = parse_events(fh, CALCHAS, str(path))
    a = DuckDBDatabase(tmp_path / "memory.duckdb")
    b = DuckDBDatabase(tmp_path / "streamed.duckdb")
    try:
        assert in_memory(a, path, file) == streamed(b, path, file, chunk)
        expected = a.fetchall(SAMPLES)
        assert b.fetchall(SAMPLES) == expected and expected
        times = [r[0] for r in b.fetchall("SELECT sampled_at FROM gpu_health_samples")]
        assert times == sorted(times)  # stored in time order, as before
        return len(expected)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("chunk", [1, 7, 1000, 100_000])
def test_streamed_import_writes_the_rows_of_the_in_memory_histories(
        tmp_path: Path, chunk: int) -> None:
    path = events_csv(tmp_path / "events.csv", rows=3000, cards=40, seed=chunk)
    assert assert_same_rows(tmp_path, path, chunk) > 3000


def test_calchas_dataset_streamed_is_the_same_as_in_memory(tmp_path: Path) -> None:
    path = require_shared("datasets/calchas") / "hbm-errors.csv"
    assert assert_same_rows(tmp_path, path, chunk=997) > 20391


def _traced_peak(tmp_path: Path, rows: int) -> int:
    # events on whole hours, as an export logs many at one second: the readings a card has are
    # few, so what could still grow is what the rows cost
    path = events_csv(tmp_path / f"events-{rows}.csv", rows=rows, cards=64, seed=5, days=3,
                      quantum=3600)
    db = DuckDBDatabase(tmp_path / f"bt-{rows}.duckdb", memory_limit=256 * 2**20)
    tracemalloc.start()
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            file = parse_events(fh, CALCHAS, str(path))
        streamed(db, path, file, chunk=2000)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        db.close()


def test_memory_does_not_grow_with_the_rows_of_the_file(tmp_path: Path) -> None:
    """Every event was held as an object (2.3 KB a row with its history: 5,000,000 rows ended
    in MemoryError); now a file four times longer costs about the same Python memory."""
    _traced_peak(tmp_path, 1_000)  # first use: caches and imports, not rows
    small, large = _traced_peak(tmp_path, 15_000), _traced_peak(tmp_path, 60_000)
    assert large < small * 1.25, (small, large)


def test_a_file_that_changes_between_its_two_reads_is_refused(tmp_path: Path) -> None:
    path = events_csv(tmp_path / "events.csv", rows=50, cards=4, seed=1)
    with path.open(encoding="utf-8", newline="") as fh:
        file = parse_events(fh, CALCHAS, str(path))
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"DC1,10.0.0.1,DSA1,{int(T0.timestamp())},CE\n")
    db = DuckDBDatabase(tmp_path / "bt.duckdb")
    with pytest.raises(ConfigError, match="changed while it was read"), \
            path.open(encoding="utf-8", newline="") as fh:
        write_events(db, iter_events(fh, CALCHAS, str(path), file), file, HOW, keepalive=KEEP)
    db.close()


def test_a_key_column_naming_more_cards_than_any_fleet_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_module, "MAX_CARDS", 3)
    lines = [HEADER, *(f"DC1,s{i},DSA1,1700000000,CE\n" for i in range(5))]
    with pytest.raises(ConfigError, match="line 5: more than 3 distinct cards"):
        parse_events(lines, CALCHAS, "x.csv")
