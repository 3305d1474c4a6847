"""The pure write rule: first / changed / uuid change / keepalive from the stored row's time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from freezegun import freeze_time

from gpu_health.evaluator.ingest.write_rule import Reason, decide
from gpu_health.evaluator.model import CardKey, Counters, Sample
from tests.evaluator.ingest_support import T0, a100

KEY = CardKey("n1", 0)
KEEP = timedelta(minutes=5)


def at(minutes: float, counters: Counters | None = None, uuid: str | None = "GPU-a") -> Sample:
    return Sample(KEY, uuid, T0 + timedelta(minutes=minutes),
                  a100(3) if counters is None else counters)


def test_first_sample_is_written() -> None:
    assert decide(at(0), None, KEEP).reason is Reason.FIRST


def test_all_unknown_is_never_written_even_first() -> None:
    d = decide(at(0, Counters()), None, KEEP)
    assert not d.write and d.reason is Reason.ALL_UNKNOWN


@pytest.mark.parametrize(
    "counters",
    [a100(4), a100(3, 1), a100(None), Counters(3, 0, None, 0, None), Counters(0, 3, 5, 0, 0)],
)
def test_any_counter_change_is_written(counters: Counters) -> None:
    d = decide(at(1, counters), at(0), KEEP)
    assert d.write and d.reason is Reason.CHANGED


def test_unknown_to_known_is_a_change() -> None:
    stored = at(0, Counters(ecc_corrected_total=3))
    d = decide(at(1, Counters(ecc_corrected_total=3, ecc_uncorrected_total=0)), stored, KEEP)
    assert d.reason is Reason.CHANGED


@pytest.mark.parametrize(("old", "new"), [("GPU-a", "GPU-b"), (None, "GPU-b"), ("GPU-a", None)])
def test_uuid_change_in_the_slot_is_written(old: str | None, new: str | None) -> None:
    d = decide(at(1, uuid=new), at(0, uuid=old), KEEP)
    assert d.write and d.reason is Reason.UUID_CHANGED


def test_unchanged_within_keepalive_is_skipped() -> None:
    d = decide(at(4.99), at(0), KEEP)
    assert not d.write and d.reason is Reason.UNCHANGED


def test_keepalive_is_measured_from_the_stored_rows_time() -> None:
    stored = at(0)
    assert decide(at(5), stored, KEEP).reason is Reason.KEEPALIVE
    # Every scrape in between was skipped, so the base did not move with them.
    assert all(not decide(at(m), stored, KEEP).write for m in (1, 2, 3, 4))
    assert decide(at(60 * 24), stored, KEEP).reason is Reason.KEEPALIVE


def test_stored_row_in_the_future_is_written_not_silenced() -> None:
    d = decide(at(0), at(30), KEEP)
    assert d.write and d.reason is Reason.LATEST_IN_FUTURE


@pytest.mark.parametrize(("scraped", "stored"), [(3, 0), (5, 0), (0, 30)])
def test_no_clock_is_read(scraped: float, stored: float) -> None:
    """The same inputs get the same answer whatever the wall clock says: the rule's "now" is
    the scrape's time. The clock is moved (freezegun) a century apart and to the scrape's
    own time; a rule that read it would answer differently across them."""
    answers = set()
    for wall in ("1990-01-01", "2090-01-01", (T0 + timedelta(minutes=scraped)).isoformat()):
        with freeze_time(wall):
            answers.add(decide(at(scraped), at(stored), KEEP))
    assert len(answers) == 1
