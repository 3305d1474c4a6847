"""Replay on the cards that can fire only: an in-memory copy of their samples.

A prediction, its features and its outcome depend on the predicted card's own rows only (every
join of feature extraction, insertion and backfill is on the card), and a card whose counters
never move (no uncorrectable count or remap failure above 0, correctable span below the
smallest ``min_increase``, no pending-remap or retired-page change) can fire no known signal
(:mod:`evaluator.backtest.activity`), and neither can a card without an active bucket. In a
fleet most cards are such cards, and every feature statement pays for all of them. So when the
cards that can fire hold at most half the rows, the versions are replayed in an in-memory
database holding only those cards (copied through a Parquet file), one after the other as in
the file, and each version's predictions are copied back. The statistics always run on the
whole file.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from evaluator.backtest.activity import KNOWN_SIGNALS, bucket_windows
from evaluator.backtest.queries import (
    active_ranges,
    changing_cards,
    drop_sample_indexes,
    has_rows,
)
from evaluator.rules.ruleset import RuleSet
from evaluator.rules.signals import SIGNALS
from evaluator.store.db import Database
from gpu_health.contract import SOURCE_REAL

MAX_SHARE = 0.5  # copy when the cards that can fire hold at most this share of the rows


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def replay_subset(db: Database, rulesets: Sequence[RuleSet],
                  max_share: float = MAX_SHARE) -> list[tuple[str, int]] | None:
    """The cards to copy, or None when the whole file must be replayed (unknown signals, XID
    fault data, or the cards that can fire hold more than ``max_share`` of the rows)."""
    if not {s.name for s in SIGNALS} <= KNOWN_SIGNALS or has_rows(db, "gpu_health_xid_samples"):
        return None
    rows, total = changing_cards(db, min(r.params.min_increase for r in rulesets))
    active: set[tuple[str, int]] = set()
    for rs in rulesets:
        w = bucket_windows(rs.params)
        active |= {(n, i) for n, i, *_ in active_ranges(
            db, bucket=w.bucket, strong=w.strong, trend=w.trend, base=w.base,
            min_increase=w.min_increase)}
    return sorted(active) if sum(rows[c] for c in active) <= max_share * total else None


@contextmanager
def working_copy(db: Database, cards: Sequence[tuple[str, int]]) -> Iterator[Database]:
    """An in-memory database with the samples of ``cards`` (in time order)."""
    with tempfile.TemporaryDirectory(prefix="gpu-health-backtest-") as tmp:
        path = Path(tmp) / "samples.parquet"
        db.execute("CREATE OR REPLACE TEMP TABLE bt_cards AS SELECT unnest($1::VARCHAR[]) AS "
                   "node_id, unnest($2::INTEGER[]) AS gpu_index",
                   [[c[0] for c in cards], [c[1] for c in cards]])
        db.execute(f"""COPY (SELECT s.* FROM gpu_health_samples s
                       SEMI JOIN bt_cards c USING (node_id, gpu_index)
                       WHERE s.source = '{SOURCE_REAL}' ORDER BY s.sampled_at)
                   TO {_literal(path)} (FORMAT parquet)""")
        work = Database(":memory:")
        try:
            drop_sample_indexes(work)
            work.execute(f"INSERT INTO gpu_health_samples SELECT * FROM read_parquet("
                         f"{_literal(path)})")
            yield work
        finally:
            work.close()


def copy_predictions(work: Database, db: Database, version: str) -> int:
    """Move ``version``'s predictions from the working copy into the backtest file."""
    with tempfile.TemporaryDirectory(prefix="gpu-health-backtest-") as tmp:
        path = Path(tmp) / "predictions.parquet"
        work.execute(f"""COPY (SELECT * FROM gpu_health_predictions
                         WHERE rule_version = '{version.replace("'", "''")}')
                     TO {_literal(path)} (FORMAT parquet)""")
        # A file replayed again already holds them (same ids, same outcomes): keep those.
        row = db.fetchone(f"INSERT INTO gpu_health_predictions SELECT * FROM read_parquet("
                          f"{_literal(path)}) ON CONFLICT DO NOTHING")
    return int(row[0])
