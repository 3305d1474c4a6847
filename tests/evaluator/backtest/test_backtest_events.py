"""Events files -> counter histories -> stored rows: parsing, the write rule's closed form, and
the Calchas preset on the public dataset (when ../shared is present)."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_health.clock import from_naive_utc
from gpu_health.errors import ConfigError
from gpu_health.evaluator.backtest.card_history import card_histories, gpu_indexes, history
from gpu_health.evaluator.backtest.events import (
    CALCHAS,
    Kind,
    iter_events,
    parse_events,
    parse_time,
)
from gpu_health.evaluator.backtest.history import keepalive_period, keepalive_rows, write_histories
from gpu_health.evaluator.ingest.write_rule import decide
from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.history.backtest_queries import preceded_by_correctable
from gpu_health.evaluator.store.statistics.stats_queries import raw_stats
from tests.shared import require_shared

T0 = datetime(2026, 3, 1, tzinfo=UTC)
MIN = timedelta(minutes=1)
KEEP = timedelta(minutes=5)

CSV = """Datacenter,Server,Name,Time,EccType
DC1,10.0.0.1,DSA3,{t1},CE
DC1,10.0.0.1,DSA3,{t2},UER
DC1,10.0.0.1,DSA5,{t1},UEO
DC2,10.0.0.2,DSA3,{t3},CE
"""


def unix(at: datetime) -> int:
    return int(at.timestamp())


def test_parse_time_accepts_unix_seconds_and_zoned_iso_only() -> None:
    assert parse_time("1650690000") == datetime(2022, 4, 23, 5, 0, tzinfo=UTC)
    assert parse_time("2026-03-01T01:00:00+01:00") == T0
    assert parse_time("2026-03-01T00:00:00Z") == T0
    assert parse_time("2026-03-01T00:00:00") is None  # no zone: the offset would be a guess
    assert parse_time("yesterday") is None


def test_calchas_shaped_file_is_read_with_the_preset() -> None:
    text = CSV.format(t1=unix(T0), t2=unix(T0 + timedelta(hours=1)), t3=unix(T0))
    lines = text.splitlines(keepends=True)
    file = parse_events(lines, CALCHAS, "x.csv")
    assert file.rows == 4 and file.events == 4
    assert file.by_type == {"CE": 2, "UER": 1, "UEO": 1}
    assert {(e.node_id, e.device, e.kind) for e in iter_events(lines, CALCHAS, "x.csv", file)} == {
        ("DC1/10.0.0.1", "DSA3", "corrected"), ("DC1/10.0.0.1", "DSA3", "uncorrected"),
        ("DC1/10.0.0.1", "DSA5", "uncorrected"), ("DC2/10.0.0.2", "DSA3", "corrected")}


def test_every_bad_row_is_listed_and_nothing_is_dropped_silently() -> None:
    text = ("Datacenter,Server,Name,Time,EccType\n"
            "DC1,s1,DSA1,1650690000,CE\n"
            "DC1,s1,DSA1,not-a-time,CE\n"
            "DC1,,DSA1,1650690000,UER\n"
            "DC1,s1,DSA1,1650690000,XID48\n")
    with pytest.raises(ConfigError) as err:
        parse_events(text.splitlines(keepends=True), CALCHAS, "bad.csv")
    problems = "\n".join(err.value.problems)
    assert "'XID48'" in problems and "neither correctable, uncorrectable nor ignored" in problems
    assert "line 3: time 'not-a-time'" in problems
    assert "line 4: empty card key column" in problems
    ignoring = dataclasses.replace(CALCHAS, ignore=frozenset({"XID48"}))
    good = "\n".join(text.splitlines()[:2] + text.splitlines()[4:]) + "\n"
    file = parse_events(good.splitlines(keepends=True), ignoring, "ok.csv")
    assert (file.rows, file.events, file.ignored) == (2, 1, 1)


def test_missing_columns_are_named() -> None:
    with pytest.raises(ConfigError, match="missing column"):
        parse_events(["Server,Name,Time\n", "s,DSA1,1\n"], CALCHAS, "x.csv")


def test_gpu_index_from_trailing_digits_else_rank() -> None:
    assert gpu_indexes([("n1", "DSA3"), ("n1", "DSA5"), ("n2", "DSA3")]) == (
        {("n1", "DSA3"): 3, ("n1", "DSA5"): 5, ("n2", "DSA3"): 3},
        "trailing digits of the device name")
    # two names of one node with the same digits: digits cannot tell the cards apart
    indexes, rule = gpu_indexes([("n1", "GPU1"), ("n1", "DSA1"), ("n1", "x")])
    assert rule.startswith("rank") and sorted(indexes.values()) == [0, 1, 2]


def test_history_counts_from_zero_with_a_lead_in_and_snaps_to_the_grid() -> None:
    events: list[tuple[datetime, Kind]] = [
        (T0 + timedelta(seconds=30), "corrected"), (T0 + timedelta(seconds=50), "corrected"),
        (T0 + timedelta(hours=2), "uncorrected")]
    h = history("n", 0, "n/0", events, start=T0 - MIN, stop=T0 + timedelta(days=1), step=MIN)
    assert h.start == T0 - MIN and h.stop == T0 + timedelta(days=1)
    # both correctable events are seen by the reading at T0 + 1 min; the first reading is 0
    assert h.changes == ((T0 - MIN, 0, 0), (T0 + MIN, 0, 2), (T0 + timedelta(hours=2), 1, 2))


def test_card_histories_observe_each_card_from_lead_in_to_last_event_plus_window() -> None:
    text = CSV.format(t1=unix(T0), t2=unix(T0 + timedelta(days=3)), t3=unix(T0))
    lines = text.splitlines(keepends=True)
    file = parse_events(lines, CALCHAS, "x.csv")
    histories, rule = card_histories(iter_events(lines, CALCHAS, "x.csv", file), step=MIN,
                                     lead_in=MIN, observe_after=timedelta(days=7))
    by_label = {h.label: h for h in histories}
    dsa3 = by_label["DC1/10.0.0.1/DSA3"]
    assert (dsa3.start, dsa3.stop) == (T0 - MIN, T0 + timedelta(days=10))
    assert (dsa3.gpu_index, dsa3.events) == (3, 2) and rule.startswith("trailing")


Change = tuple[datetime, int | None, int | None]
KINDS: tuple[Kind, ...] = ("corrected", "uncorrected")


def reference_rows(h_start: datetime, stop: datetime, step: timedelta,
                   changes: list[Change]) -> list[Change]:
    """Every reading on the grid through the live write rule, one by one."""
    rows: list[Change] = []
    last: Sample | None = None
    at, i = h_start, 0
    while at <= stop:
        while i + 1 < len(changes) and changes[i + 1][0] <= at:
            i += 1
        sample = Sample(CardKey("n", 0), None, at, Counters(changes[i][1], changes[i][2]))
        if decide(sample, last, KEEP).write:
            last = sample
            rows.append((at, changes[i][1], changes[i][2]))
        at += step
    return rows


@pytest.mark.parametrize("step_s", [60, 45, 7, 300, 420])
def test_closed_form_equals_the_live_write_rule_reading_by_reading(step_s: int) -> None:
    rng = random.Random(step_s)
    step = timedelta(seconds=step_s)
    for _ in range(20):
        events = [(T0 + timedelta(seconds=rng.uniform(0, 6 * 3600)), rng.choice(KINDS))
                  for _ in range(rng.randint(0, 12))]
        h = history("n", 0, "n/0", events, start=T0, stop=T0 + timedelta(hours=7), step=step)
        expected = reference_rows(h.start, h.stop, step, list(h.changes))
        assert keepalive_rows(h, keepalive_period(step, KEEP)) == expected


def test_bulk_expansion_in_duckdb_equals_the_closed_form(tmp_path: Path) -> None:
    rng = random.Random(3)
    histories = []
    for gpu in range(6):
        events = [(T0 + timedelta(days=rng.uniform(0, 20)), rng.choice(KINDS + KINDS[:1]))
                  for _ in range(rng.randint(0, 40))]
        histories.append(history("n", gpu, f"n/{gpu}", events, start=T0 + timedelta(hours=gpu),
                                 stop=T0 + timedelta(days=21 - gpu), step=MIN))
    db = DuckDBDatabase(tmp_path / "bt.duckdb")
    written = write_histories(db, histories, step=MIN, keepalive=KEEP)
    stored = db.fetchall("SELECT gpu_index, sampled_at, ecc_uncorrected_total, "
                         "ecc_corrected_total, retired_pages, remapped_rows_pending, "
                         "remapped_rows_failure, gpu_uuid, source FROM gpu_health_samples "
                         "ORDER BY gpu_index, sampled_at")
    period = keepalive_period(MIN, KEEP)
    expected = [(h.gpu_index, at, unc, corr, None, None, None, None, "real")
                for h in histories for at, unc, corr in keepalive_rows(h, period)]
    assert written == len(expected)
    assert [(g, from_naive_utc(at), *rest) for g, at, *rest in stored] == expected
    times = [r[0] for r in db.fetchall("SELECT sampled_at FROM gpu_health_samples")]
    assert times == sorted(times)  # stored in time order (zone maps skip row groups)
    db.close()


def test_calchas_dataset_with_the_preset(tmp_path: Path) -> None:
    path = require_shared("datasets/calchas") / "hbm-errors.csv"
    with path.open(encoding="utf-8", newline="") as fh:
        file = parse_events(fh, CALCHAS, str(path))
    assert file.rows == 20391 and file.ignored == 0
    assert file.by_type == {"CE": 10470, "UER": 334, "UEO": 9587}
    with path.open(encoding="utf-8", newline="") as fh:
        histories, rule = card_histories(iter_events(fh, CALCHAS, str(path), file), step=MIN,
                                         lead_in=MIN, observe_after=timedelta(days=7))
    assert len(histories) == 51 and rule == "trailing digits of the device name"
    db = DuckDBDatabase(tmp_path / "calchas.duckdb")
    write_histories(db, histories, step=MIN, keepalive=KEEP)
    lo, hi = (from_naive_utc(v) for v in db.fetchone(
        "SELECT min(sampled_at), max(sampled_at) FROM gpu_health_samples"))
    raw = raw_stats(db, since=lo, until=hi, source="real", nodes=None)
    # 39 devices report an uncorrectable error; the lead-in makes each first one an increase
    assert raw.monitorable_cards == 51 and len(raw.faults) == 39
    faults = [(f.node_id, f.gpu_index, f.gpu_uuid, f.first_fault_at) for f in raw.faults]
    # only 3 of them saw any correctable error before: the ceiling of a correctable-ECC rule
    assert preceded_by_correctable(db, faults) == 3
    db.close()


HEADER = "Datacenter,Server,Name,Time,EccType\n"


def _events_file(tmp_path: Path, body: bytes) -> Path:
    path = tmp_path / "events.csv"
    path.write_bytes(HEADER.encode() + body)
    return path


@pytest.mark.parametrize("body,needle", [
    (b"DC1,s1,DSA1," + b"9" * (50 * 1024 * 1024) + b",CE\n",
     "line 2: field larger than field limit"),
    (b"DC1,s1,DSA1,1700000000,C\x00E\n", "event type(s) 'C\\x00E' are neither"),
    (b"DC1,s1,DSA1,1700000000,CE\nDC1,s1,DSA\xff\xfe,1700000000,CE\n", "not UTF-8"),
], ids=["a 50 MB field", "a NUL byte", "not UTF-8"])
def test_a_hostile_events_file_is_one_clear_line_and_exit_2(
        tmp_path: Path, body: bytes, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A 50 MB field ended in a traceback (the csv module's field limit)."""
    from gpu_health.evaluator.main import main

    code = main(["backtest", "--db", str(tmp_path / "bt.duckdb"), "--events",
                 str(_events_file(tmp_path, body)), "--preset", "calchas"])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err[-2000:]
    assert len(err) < 2000  # the field is never echoed


def test_many_bad_rows_cost_twenty_messages(tmp_path: Path) -> None:
    """5,000,000 rows with bad times peaked at 1.6 GB of problem strings; now the first twenty
    are kept and the rest counted, and a long bad field is shown cut."""
    rows = [f"DC1,s1,DSA1,{'x' * 500},CE\n" for _ in range(100_000)]
    with pytest.raises(ConfigError) as info:
        parse_events([HEADER, *rows], CALCHAS, "bad.csv")
    problems = info.value.problems
    assert len(problems) == 21 and problems[-1] == "bad.csv: ... and 99980 more problem(s)"
    assert "'xxxxxxxxxx" in problems[0] and "...'" in problems[0] and len(problems[0]) < 200
