"""The events benchmark's file (bench/events_import.py) holds the rows and cards it claims, in
the public dataset's shape: the command's own reader finds every row, and as many distinct cards
as the generator says it named."""

from __future__ import annotations

from pathlib import Path

from bench.events_import import card_name, write_events_csv
from gpu_health.evaluator.backtest.events import CALCHAS, parse_events


def test_card_names_are_distinct_up_to_a_million_cards() -> None:
    assert len({card_name(c) for c in range(1_000_000)}) == 1_000_000


def test_the_generated_file_has_the_rows_and_cards_it_claims(tmp_path: Path) -> None:
    path = tmp_path / "events.csv"
    named = write_events_csv(path, rows=20_000, cards=512, days=3)
    with path.open(encoding="utf-8", newline="") as fh:
        file = parse_events(fh, CALCHAS, str(path))
    assert (file.rows, file.events, len(file.cards)) == (20_000, 20_000, named)
    assert named > 400  # skewed, yet most cards carry events
    assert set(file.by_type) == {"CE", "UER"} and file.by_type["CE"] > 19_900
