"""Row-remap details through the evaluator: parsed from the exposition, written change-only
with the counters, stored in nullable columns (a migration adds them to older files)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from evaluator.ingest.cards import parse_cards
from evaluator.ingest.write_rule import Reason, decide
from evaluator.model import CardKey, Counters, RemapDetails, Sample
from evaluator.store import Database
from evaluator.store.samples import insert_samples, latest_rows
from gpu_health.clock import to_naive_utc
from tests.evaluator.ingest_support import T0
from tests.evaluator.store_support import older_file

LABELS = 'gpu="0",uuid="GPU-a",vendor="nvidia"'


def exposition(none_banks: str = "0") -> str:
    return (f"gpu_health_ecc_corrected_total{{{LABELS}}} 3\n"
            f"gpu_health_remapped_rows_pending{{{LABELS}}} 1\n"
            f"gpu_health_remapped_rows_correctable{{{LABELS}}} 0\n"
            f"gpu_health_remapped_rows_uncorrectable{{{LABELS}}} 4\n"
            f'gpu_health_remap_bank_availability{{{LABELS},level="max"}} 191\n'
            f'gpu_health_remap_bank_availability{{{LABELS},level="none"}} {none_banks}\n'
            f'gpu_health_remap_bank_availability{{{LABELS},level="bogus"}} 7\n')


def test_remap_details_are_parsed_and_unknown_levels_stay_unknown() -> None:
    extraction = parse_cards(exposition())
    (card,) = extraction.cards
    assert card.remap == RemapDetails(remapped_rows_correctable=0,
                                      remapped_rows_uncorrectable=4, remap_banks_max=191,
                                      remap_banks_none=0)  # high/partial/low absent: unknown
    assert card.remap.remap_banks_high is None
    assert extraction.ignored_series["bad_level_label"] == 1


def test_a_change_of_remap_details_alone_is_written() -> None:
    key = CardKey("n1", 0)
    before = Sample(key, "GPU-a", T0, Counters(0, 3), RemapDetails(remap_banks_none=0))
    after = Sample(key, "GPU-a", T0 + timedelta(minutes=1), Counters(0, 3),
                   RemapDetails(remap_banks_none=1))
    assert decide(after, before, timedelta(minutes=5)).reason is Reason.CHANGED
    same = Sample(key, "GPU-a", T0 + timedelta(minutes=1), Counters(0, 3),
                  RemapDetails(remap_banks_none=0))
    assert decide(same, before, timedelta(minutes=5)).reason is Reason.UNCHANGED


def test_stored_and_read_back_with_unknown_as_none(tmp_path: Path) -> None:
    db = Database(tmp_path / "a.duckdb")
    key = CardKey("n1", 0)
    details = RemapDetails(remapped_rows_uncorrectable=4, remap_banks_max=191)
    insert_samples(db, [Sample(key, "GPU-a", T0, Counters(0, 3), details)])
    assert latest_rows(db, [key])[key].remap == details
    db.close()


def test_the_migration_adds_nullable_columns_to_an_older_file(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    # A file written before migration 4: the migration then runs on a table with both
    # indexes, as on a real older file.
    with older_file(path, 3) as con:
        con.execute("INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, "
                    "sampled_at, ecc_uncorrected_total, ecc_corrected_total) "
                    "VALUES ('n1', 0, 'GPU-a', 'real', ?, 0, 3)", [to_naive_utc(T0)])
    db = Database(path)  # migrates on open
    (sample,) = latest_rows(db, [CardKey("n1", 0)]).values()
    assert sample.counters == Counters(0, 3)
    assert sample.remap == RemapDetails()  # unknown, never 0
    db.close()
