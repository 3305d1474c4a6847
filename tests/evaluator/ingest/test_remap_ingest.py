"""Memory details through the evaluator (row-remap details, NVIDIA's recovery action and
pending page retirement): parsed from the exposition, written change-only with the counters,
stored in nullable columns (migrations add them to older files)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.clock import to_naive_utc
from gpu_health.contract import RECOVERY_ACTIONS
from gpu_health.evaluator.ingest.cards import parse_cards
from gpu_health.evaluator.ingest.write_rule import Reason, decide
from gpu_health.evaluator.model import CardDetails, CardKey, Counters, Sample
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.samples import insert_samples, latest_rows
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
    assert card.details == CardDetails(remapped_rows_correctable=0,
                                      remapped_rows_uncorrectable=4, remap_banks_max=191,
                                      remap_banks_none=0)  # high/partial/low absent: unknown
    assert card.details.remap_banks_high is None
    assert extraction.ignored_series["bad_level_label"] == 1


def test_a_change_of_remap_details_alone_is_written() -> None:
    key = CardKey("n1", 0)
    before = Sample(key, "GPU-a", T0, Counters(0, 3), CardDetails(remap_banks_none=0))
    after = Sample(key, "GPU-a", T0 + timedelta(minutes=1), Counters(0, 3),
                   CardDetails(remap_banks_none=1))
    assert decide(after, before, timedelta(minutes=5)).reason is Reason.CHANGED
    same = Sample(key, "GPU-a", T0 + timedelta(minutes=1), Counters(0, 3),
                  CardDetails(remap_banks_none=0))
    assert decide(same, before, timedelta(minutes=5)).reason is Reason.UNCHANGED


def test_stored_and_read_back_with_unknown_as_none(tmp_path: Path) -> None:
    db = DuckDBDatabase(tmp_path / "a.duckdb")
    key = CardKey("n1", 0)
    details = CardDetails(remapped_rows_uncorrectable=4, remap_banks_max=191)
    insert_samples(db, [Sample(key, "GPU-a", T0, Counters(0, 3), details)])
    assert latest_rows(db, [key])[key].details == details
    db.close()


def test_the_migration_adds_nullable_columns_to_an_older_file(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    # A file written before migration 4: the migration then runs on a table with both
    # indexes, as on a real older file.
    with older_file(path, 3) as con:
        con.execute("INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, "
                    "sampled_at, ecc_uncorrected_total, ecc_corrected_total) "
                    "VALUES ('n1', 0, 'GPU-a', 'real', ?, 0, 3)", [to_naive_utc(T0)])
    db = DuckDBDatabase(path)  # migrates on open
    (sample,) = latest_rows(db, [CardKey("n1", 0)]).values()
    assert sample.counters == Counters(0, 3)
    assert sample.details == CardDetails()  # unknown, never 0
    db.close()


def recovery(values: dict[str, str], pending: str | None = "1") -> str:
    lines = [f"gpu_health_ecc_corrected_total{{{LABELS}}} 3\n"]
    lines += [f'gpu_health_recovery_action{{{LABELS},action="{a}"}} {v}\n'
              for a, v in values.items()]
    if pending is not None:
        lines.append(f"gpu_health_retired_pages_pending{{{LABELS}}} {pending}\n")
    return "".join(lines)


def state_set(current: str) -> dict[str, str]:
    return {a: "1" if a == current else "0" for a in RECOVERY_ACTIONS}


@pytest.mark.parametrize("action", RECOVERY_ACTIONS)
def test_the_recovery_state_set_is_stored_as_its_nvml_value(action: str) -> None:
    extraction = parse_cards(recovery(state_set(action)))
    (card,) = extraction.cards
    assert card.details.recovery_action == RECOVERY_ACTIONS.index(action)
    assert card.details.retired_pages_pending == 1
    assert extraction.ignored_series == {} and extraction.unknown_values == {}


@pytest.mark.parametrize("values", [
    {"none": "1", "node_reboot": "1"},          # two current actions
    {"none": "0", "gpu_reset": "0"},            # none current
    {"none": "1", "gpu_reset": "0.5"},          # not a state-set value
    {"none": "0", "future_action": "1"},        # an action this evaluator does not know
])
def test_a_broken_state_set_is_unknown_and_counted(values: dict[str, str]) -> None:
    extraction = parse_cards(recovery(values, pending=None))
    (card,) = extraction.cards
    assert card.details.recovery_action is None
    assert card.details.retired_pages_pending is None  # absent: unknown, never 0
    assert extraction.unknown_values.get("bad_state_set") == 1


def test_a_duplicated_recovery_series_makes_the_action_unknown() -> None:
    text = recovery(state_set("gpu_reset")) + \
        f'gpu_health_recovery_action{{{LABELS},action="gpu_reset"}} 1\n'
    (card,) = parse_cards(text).cards
    assert card.details.recovery_action is None


@pytest.mark.parametrize(("before", "after"), [
    (CardDetails(recovery_action=0), CardDetails(recovery_action=2, retired_pages_pending=1)),
    (CardDetails(hw_thermal_slowdown_us=0),  # beyond memory (migration 13)
     CardDetails(hw_thermal_slowdown_us=60_000_000, pcie_link_width=8)),
    (CardDetails(pcie_replays=40), CardDetails(pcie_replays=41)),  # migration 14
    (CardDetails(nvlink_errors=0), CardDetails(nvlink_errors=3)),  # migration 15
])
def test_a_detail_alone_is_a_change_and_is_stored(tmp_path: Path, before: CardDetails,
                                                  after: CardDetails) -> None:
    key = CardKey("n1", 0)
    first = Sample(key, "GPU-a", T0, Counters(0, 3), before)
    then = Sample(key, "GPU-a", T0 + timedelta(minutes=1), Counters(0, 3), after)
    assert decide(then, first, timedelta(minutes=5)).reason is Reason.CHANGED
    db = DuckDBDatabase(tmp_path / "a.duckdb")
    insert_samples(db, [first, then])
    assert latest_rows(db, [key])[key].details == after
    db.close()


@pytest.mark.parametrize(("version", "column", "known"), [
    (7, "remapped_rows_pending", CardDetails()),  # before migration 8
    (12, "recovery_action", CardDetails(recovery_action=0)),  # before migration 13
    (13, "fabric_state", CardDetails(fabric_state=0)),  # before migration 14
])
def test_a_migration_leaves_older_rows_unknown(tmp_path: Path, version: int, column: str,
                                               known: CardDetails) -> None:
    path = tmp_path / "old.duckdb"
    with older_file(path, version) as con:
        con.execute("INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, "
                    f"sampled_at, ecc_corrected_total, {column}) "
                    "VALUES ('n1', 0, 'GPU-a', 'real', ?, 3, 0)", [to_naive_utc(T0)])
    db = DuckDBDatabase(path)
    (sample,) = latest_rows(db, [CardKey("n1", 0)]).values()
    assert sample.details == known  # every column added after the row: unknown, never 0
    db.close()
