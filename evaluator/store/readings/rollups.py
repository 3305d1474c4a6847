"""Per-card daily rollups: statistics and the tick read summaries, not every raw row.

Why (measured at 16,384 cards x 37 days): statistics grouped every sample of the
retention period (10 s) and the tick read seven days of rows for the baseline count and up to 35
days for the open prediction windows (8 s). DuckDB cannot look up one card's rows quickly (rows are
stored in arrival order; its ART index only serves constant point lookups and was 90% of the file),
so every per-card question became a scan of time. Now:

- ``gpu_health_sample_days`` holds one segment (:mod:`gpu_health.evaluator.store.rollup_sql`) per
series and
  UTC day, for every day before the *sealed* watermark (``gpu_health_rollup_state``). The
  invariant readers rely on: a sealed day's rollup equals the aggregate of that day's raw rows.
  Rows at and after the watermark are read raw; they lie together at the end of the table
  (skipped to by DuckDB's zone maps);
- :func:`seal` moves the watermark every ``seal_every`` (an hour on both engines; 10 minutes
  after it, so the hour's last rows are in), about a million raw rows per statement: the day
  being sealed has one segment for its rows before the watermark, grown each hour by merging
  the new hour's rows into it (:func:`~gpu_health.evaluator.store.rollup_sql.merge_day`), so readers
  still see one segment per series and day, and only a partial day's segment ends at the watermark
  instead of a midnight (:func:`covered`). Raw rows after the watermark: an hour or so;
- rows written later into a sealed day (a skewed clock, an import) re-summarise their cards' days
  in the same transaction (:func:`after_insert`); retention and the simulated purge keep the
  invariant too (:func:`after_retention`, :func:`after_purge`);
- ``gpu_health_window_edges`` holds, per pending prediction, the segments of its window's partial
  first and last days (t0 to midnight, midnight to the window's end), each computed once its
  whole day is sealed (:mod:`gpu_health.evaluator.store.predictions.window_edges`): with the sealed
  days between and the raw rows after the watermark, a window is observed without reading its old
  rows again. An edge is dropped when its day is re-summarised.

Answers do not change: every reader combines segments into exactly what the raw rows said.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.rollup_sql import (
    DAYS,
    EDGES,
    FIELD_LIST,
    SEALED_MEMO,
    SERIES,
    STATE,
    day_segments,
    merge_day,
)

log = logging.getLogger(__name__)

DAY: Final = timedelta(days=1)
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
GRACE: Final = timedelta(minutes=10)  # rows of an hour (a day) still arriving just after it ends
CHUNK_ROWS: Final = 1_000_000  # raw rows per sealing statement (memory of the window pass)
# Sealing and lead refreshes of two workers in one process (DuckDB: one process per file) run
# one at a time: neither table has a key that would refuse a second copy of a row.
WRITING: Final = threading.RLock()


def day_floor(at: datetime) -> datetime:
    return at.replace(hour=0, minute=0, second=0, microsecond=0)


def step_floor(at: datetime, step: timedelta) -> datetime:
    """``at`` rounded down to a multiple of ``step`` (an hour or a day) since the epoch."""
    return EPOCH + (at - EPOCH) // step * step


def sealed_until(db: Database) -> datetime | None:
    """The watermark (aware UTC): every day before it is summarised. None: nothing sealed yet.
    Read once per process (``db.memo``), then kept in step by :func:`seal`; on a shared store
    (PostgreSQL: another evaluator seals) read from the table every time."""
    if db.shared or SEALED_MEMO not in db.memo:  # cleared by a rollback
        db.read_memo()
    value: datetime | None = db.memo[SEALED_MEMO]
    return value


def watermark(db: Database) -> datetime:
    """:func:`sealed_until`, or the epoch when nothing is sealed (no day comes before it)."""
    return sealed_until(db) or EPOCH


def covered(db: Database, until: datetime) -> datetime:
    """The end of the sealed segments a reader bounded by ``until`` may use: the watermark
    when every sealed row is at or before ``until``, else ``until``'s midnight (whole days
    before it; a partly sealed day may hold rows after ``until``)."""
    sealed, bound = watermark(db), until + timedelta(microseconds=1)
    return sealed if sealed <= bound else day_floor(bound)


def _summarise(db: Database, lo: datetime, hi: datetime, parts: int = 1) -> None:
    """Replace the rollups of every series for the days in [lo, hi): one statement, or ``parts``
    statements over disjoint sets of nodes (a day of a very large fleet, bounded memory)."""
    params = {"lo": lo, "hi": hi}
    db.execute(f"DELETE FROM {DAYS} WHERE day >= $lo AND day < $hi", params)
    if parts <= 1:
        db.execute(f"INSERT INTO {DAYS} {day_segments()}", params)
        return
    for part in range(parts):
        db.execute(f"INSERT INTO {DAYS} {day_segments(part=_PART)}",
                   params | {"parts": parts, "part": part})


def seal(db: Database, now: datetime) -> int:
    """Summarise the rows before ``now - GRACE`` rounded down to ``seal_every`` not yet sealed;
    return how many whole days that completed.
    No statement when nothing is due (the worker calls this every tick)."""
    with WRITING:
        return _seal(db, now)


def hold_watermark(db: Database) -> None:
    """Inside a transaction writing samples to a shared store: keep the watermark where it is
    until this transaction ends. A seal (:func:`_seal`) waits for the inserting transactions
    before it summarises (so it sees their rows), and an insert waiting on a seal then reads the
    new watermark and re-summarises a day sealed meanwhile. DuckDB: one process, nothing to do."""
    if db.shared:
        db.execute(f"LOCK TABLE {STATE} IN SHARE MODE")


def _seal_lock(db: Database) -> None:
    if db.shared:  # conflicts with hold_watermark's SHARE lock and with itself
        db.execute(f"LOCK TABLE {STATE} IN SHARE ROW EXCLUSIVE MODE")


def _seal(db: Database, now: datetime) -> int:
    target = step_floor(now - GRACE, db.seal_every)
    start = sealed_until(db)
    if start is not None and start >= target:
        return 0
    if start is None:
        row = db.fetchone("SELECT min(sampled_at) FROM gpu_health_samples")
        start = target if row[0] is None else min(day_floor(row[0]), target)
    if start == target:
        _set_watermark(db, target)  # nothing to summarise (an empty store)
        return 0
    days = 0
    if start > day_floor(start):  # a partly sealed day: its next hours, or the rest of it
        end = min(day_floor(start) + DAY, target)
        _seal_part(db, start, end)
        days, start = int(end == day_floor(start) + DAY), end
    if start < day_floor(target):
        days, start = days + _seal_days(db, start, day_floor(target)), day_floor(target)
    if start < target:  # the current day's hours so far (hourly sealing)
        _seal_part(db, start, target)
    if days > 1:
        log.info("summarised %d day(s) of samples up to %s", days, target.isoformat())
    return days


def _seal_days(db: Database, start: datetime, target: datetime) -> int:
    """Summarise the whole days [start, target) (midnights), a chunk per transaction."""
    days = 0
    step, parts = _chunks(db, start, target)
    while start < target:
        end = min(start + step * DAY, target)
        with db.transaction():
            _seal_lock(db)
            _summarise(db, start, end, parts)
            _set_watermark(db, end)
        days += (end - start) // DAY
        start = end
    return days


def _seal_part(db: Database, lo: datetime, hi: datetime) -> None:
    """Merge the rows in [lo, hi) (one day's) into that day's segments. The merged rows go
    through a temporary table: the day's old segments are read and replaced."""
    _, parts = _chunks(db, lo, hi)
    day = {"day": day_floor(lo)}
    span = day | {"lo": lo, "hi": hi}
    columns = f"{SERIES}, day, {FIELD_LIST}, corr_hours"
    with db.transaction():
        _seal_lock(db)
        for part in range(parts):
            split = {"parts": parts, "part": part} if parts > 1 else {}
            into = f"CREATE TEMP TABLE {_MERGED} AS" if part == 0 else f"INSERT INTO {_MERGED}"
            db.execute(f"{into} {merge_day(part=_PART if split else '')}", span | split)
        db.execute(f"DELETE FROM {DAYS} WHERE day = $day", day)
        db.execute(f"INSERT INTO {DAYS} ({columns}) SELECT {columns} FROM {_MERGED}")
        db.execute(f"DROP TABLE {_MERGED}")
        _set_watermark(db, hi)


def _chunks(db: Database, start: datetime, end: datetime) -> tuple[int, int]:
    """(days per transaction, statements per day) for about CHUNK_ROWS raw rows per statement:
    many days at once for a small or sparse history, one day split by node for a fleet whose
    day holds more (100,000 cards: ~29 M rows a day), so memory stays bounded."""
    row = db.fetchone("SELECT count(*) FROM gpu_health_samples WHERE sampled_at >= $start "
                      "AND sampled_at < $end",
                      {"start": start, "end": end})
    per_day = max(1, int(row[0]) // max(1, (end - start) // DAY))
    return max(1, min(366, CHUNK_ROWS // per_day)), -(-per_day // CHUNK_ROWS)


def _set_watermark(db: Database, at: datetime) -> None:
    db.execute(f"DELETE FROM {STATE}")
    db.execute(f"INSERT INTO {STATE} VALUES ($at)", {"at": at})
    db.memo[SEALED_MEMO] = at  # a rollback clears the memo: the next read asks the table


_PART: Final = " AND hash(s.node_id) % $parts = $part"
_MERGED: Final = "gpu_health_seal_merge"  # temporary: one day's merged segments
_RESUMMARISE: Final = """
WITH touched AS (
    SELECT DISTINCT unnest($t_source::VARCHAR[]) AS source, unnest($t_node::VARCHAR[]) AS node_id,
           unnest($t_idx::INTEGER[]) AS gpu_index, unnest($t_day::TIMESTAMP[]) AS day
)
"""


def late(db: Database, times: Iterable[datetime]) -> bool:
    """Whether any of these sample times falls in a sealed day (no statement once read)."""
    sealed = sealed_until(db)
    return sealed is not None and any(t < sealed for t in times)


def after_insert(db: Database, rows: Iterable[tuple[str, str, int, datetime]]) -> int:
    """Keep the invariant after inserting rows (source, node, index, sampled_at): the days of
    rows before the watermark are re-summarised for their cards, and the leads of predictions
    starting on those days dropped. Call inside the inserting transaction. Returns the number of
    (card, day) pairs redone (0, and no statement, in the steady state)."""
    sealed = sealed_until(db)
    if sealed is None:
        return 0
    touched = sorted({(s, n, i, day_floor(at)) for s, n, i, at in rows if at < sealed})
    if not touched:
        return 0
    keys: dict[str, Any] = {
        "t_source": [t[0] for t in touched], "t_node": [t[1] for t in touched],
        "t_idx": [t[2] for t in touched], "t_day": [t[3] for t in touched]}
    # a partly sealed day (hourly sealing) is summarised up to the watermark only
    span = {"lo": min(t[3] for t in touched),
            "hi": min(max(t[3] for t in touched) + DAY, sealed)}
    db.execute(f"""{_RESUMMARISE}
        DELETE FROM {DAYS} d WHERE EXISTS (SELECT 1 FROM touched t
            WHERE t.source = d.source AND t.node_id = d.node_id AND t.gpu_index = d.gpu_index
              AND t.day = d.day)""", keys)
    semi = (" AND EXISTS (SELECT 1 FROM touched t WHERE t.source = s.source"
            " AND t.node_id = s.node_id AND t.gpu_index = s.gpu_index"
            " AND t.day = date_trunc('day', s.sampled_at))")
    db.execute(f"{_RESUMMARISE} INSERT INTO {DAYS} {day_segments(cards=semi)}",
               keys | span)
    db.execute(f"""{_RESUMMARISE}
        DELETE FROM {EDGES} WHERE prediction_id IN (
            SELECT p.id FROM gpu_health_predictions p JOIN touched t
              ON t.source = p.source AND t.node_id = p.node_id AND t.gpu_index = p.gpu_index
             AND t.day IN (date_trunc('day', p.t0), date_trunc('day', p.window_end)))""", keys)
    return len(touched)


def after_retention(db: Database, cutoff: datetime) -> None:
    """Keep the invariant after retention deleted the raw rows before ``cutoff``: the rollups of
    the days gone, the edges of windows starting on a deleted or cut day (and of resolved
    predictions), and the cut day summarised again when sealed. Call inside that transaction."""
    first = day_floor(cutoff)
    db.execute(f"DELETE FROM {DAYS} WHERE day < $first", {"first": first})
    db.execute(f"DELETE FROM {EDGES} WHERE prediction_id NOT IN (SELECT id FROM "
               "gpu_health_predictions WHERE status = 'pending' AND t0 >= $after)",
               {"after": first + DAY})
    sealed = sealed_until(db)
    if cutoff > first and sealed is not None and first < sealed:
        _summarise(db, first, min(first + DAY, sealed))


def after_purge(db: Database, source: str) -> None:
    """Keep the invariant after every row and prediction of ``source`` was deleted. Call inside
    that transaction."""
    db.execute(f"DELETE FROM {DAYS} WHERE source = $source", {"source": source})
    db.execute(f"DELETE FROM {EDGES} WHERE prediction_id NOT IN "
               "(SELECT id FROM gpu_health_predictions)")


__all__ = [
    "DAY",
    "EPOCH",
    "FIELD_LIST",
    "SERIES",
    "WRITING",
    "after_insert",
    "after_purge",
    "after_retention",
    "covered",
    "day_floor",
    "hold_watermark",
    "late",
    "seal",
    "sealed_until",
    "step_floor",
    "watermark",
]
