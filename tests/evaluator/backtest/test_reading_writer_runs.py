"""``ReadingWriter`` fed only change points (``change`` + ``hold``) keeps exactly the rows it
keeps when fed every step (``add``), the live write rule's decisions (Hypothesis)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_health.evaluator.backtest.history import ReadingWriter
from gpu_health.evaluator.model import CardDetails, CardKey, Counters, Sample

T0 = datetime(2026, 5, 1, tzinfo=UTC)
KEY = CardKey("n1", 0)
READING = st.one_of(
    st.none(),  # no reading at this step (a gap)
    st.tuples(st.sampled_from(["GPU-a", "GPU-b"]),
              st.sampled_from([Counters(0, 1), Counters(0, 2), Counters(None, 2), Counters()]),
              st.sampled_from([CardDetails(), CardDetails(hw_thermal_slowdown_us=5)])))


def _rows(writer: ReadingWriter) -> list[Sample]:
    rows = list(writer.pending)
    for first, last in writer.runs:
        t = first.sampled_at
        while t <= last:
            rows.append(Sample(first.key, first.gpu_uuid, t, first.counters, first.details))
            t += writer.period
    return sorted(rows, key=lambda s: s.sampled_at)


@settings(max_examples=300, deadline=None)
@given(st.lists(READING, min_size=1, max_size=80), st.sampled_from([30, 60, 90]),
       st.sampled_from([120, 300, 301]), st.lists(st.integers(1, 79), max_size=4))
def test_change_points_and_runs_keep_the_rows_of_every_step(
        readings: list[tuple[str, Counters, CardDetails] | None], step_s: int, keep_s: int,
        edges: list[int]) -> None:
    step, keepalive = timedelta(seconds=step_s), timedelta(seconds=keep_s)
    every = ReadingWriter.open(None, keepalive)  # type: ignore[arg-type]  # no flush here
    for i, r in enumerate(readings):
        if r is not None:
            every.add(KEY, r[0], T0 + i * step, r[1], r[2])
    changes = ReadingWriter.open(None, keepalive, step)  # type: ignore[arg-type]
    before: object = "start"
    for i, r in enumerate(readings):
        if r != before:
            changes.change(KEY, T0 + i * step, r)
            before = r
        if i in edges:  # a chunk ends here: runs held up to the next step
            changes.hold_all(T0 + (i + 1) * step)
    changes.hold_all(T0 + len(readings) * step)
    assert _rows(changes) == every.pending


def test_a_run_is_one_entry_not_one_row_per_keepalive(tmp_path: Path) -> None:
    writer = ReadingWriter.open(None, timedelta(minutes=5),  # type: ignore[arg-type]
                                timedelta(minutes=1))
    writer.change(KEY, T0, ("GPU-a", Counters(0, 1), CardDetails()))
    writer.hold_all(T0 + timedelta(days=1))
    assert len(writer.pending) == 1 and len(writer.runs) == 1
    assert len(_rows(writer)) == 288  # a row every 5 minutes for a day
