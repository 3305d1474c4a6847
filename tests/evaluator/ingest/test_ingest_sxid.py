"""NVSwitch SXid counts: read from an exposition as the node's (labels, values, duplicates, the
series bound), written change-only through their cache, kept by retention as each series' base,
purged with simulated data and with an unfinished import's rows, committed with the cycle or
not at all (real DuckDB and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_health.clock import from_naive_utc
from gpu_health.contract import MAX_SXID_SERIES, SXID_METRIC
from gpu_health.errors import ParseError, StoreError
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cards import parse_cards
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache, SxidDedupCache
from gpu_health.evaluator.ingest.exposition import parse_value
from gpu_health.evaluator.ingest.scrape import ScrapeResult
from gpu_health.evaluator.ingest.write_rule import SxidReason, decide_sxid
from gpu_health.evaluator.model import CardKey, Sample, SxidKey, SxidSample
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history import import_marker
from gpu_health.evaluator.store.readings.cycles import write_cycle
from gpu_health.evaluator.store.readings.maintenance import delete_samples_before, purge_simulated
from gpu_health.evaluator.store.readings.sxid_samples import latest_sxid_rows
from tests.conftest import NewDb
from tests.evaluator.ingest.test_exposition_properties import QUICK, VALUES
from tests.evaluator.ingest_support import T0, FakeClock, a100
from tests.evaluator.store_support import count_samples

CARD = 'gpu_health_ecc_corrected_total{gpu="0",uuid="GPU-a",vendor="nvidia"} 3\n'


def line(count: str = "1", *, switch: str = "0", pci: str = "0000:05:00", sxid: str = "20034",
         severity: str = "fatal") -> str:
    return (f'{SXID_METRIC}{{nvswitch="{switch}",pci_bus_id="{pci}",sxid="{sxid}",'
            f'severity="{severity}"}} {count}\n')


def test_an_sxid_is_the_nodes_not_a_cards() -> None:
    extraction = parse_cards(CARD + line("2") + line("1", switch="3", pci="0000:0A:00.0",
                                                    sxid="12028", severity="non_fatal"))
    assert extraction.sxids == (((0, "0000:05:00", 20034, True), 2),
                                ((3, "0000:0a:00.0", 12028, False), 1))
    (card,) = extraction.cards
    assert card.xids == () and extraction.ignored_series == {} == extraction.unknown_values


def test_only_sxids_and_no_card() -> None:
    extraction = parse_cards(line("0"))
    assert extraction.cards == () and extraction.sxids == (((0, "0000:05:00", 20034, True), 0),)


@pytest.mark.parametrize("labels", [
    {"switch": "-1"}, {"switch": "x"}, {"switch": str(2**31)}, {"pci": "05:00.0"},
    {"pci": ""}, {"sxid": ""}, {"sxid": "1.5"}, {"severity": "Fatal"}, {"severity": ""}])
def test_labels_that_name_no_series_are_ignored(labels: dict[str, str]) -> None:
    extraction = parse_cards(CARD + line(**labels))
    assert extraction.sxids == () and extraction.ignored_series == {"bad_sxid_label": 1}


@pytest.mark.parametrize(("value", "reason"), [("NaN", "nan"), ("-1", "negative"),
                                               ("1.5", "non_integer")])
def test_an_unknown_count_is_left_out_not_zero(value: str, reason: str) -> None:
    extraction = parse_cards(CARD + line(value) + line("4", sxid="1"))
    assert extraction.sxids == (((0, "0000:05:00", 1, True), 4),)
    assert extraction.unknown_values == {reason: 1}


def test_two_series_of_one_key_leave_it_out() -> None:
    # the same key twice: one spelled in upper case, which the exporter never writes
    extraction = parse_cards(line("1") + line("2", pci="0000:05:00".upper()) + line("1", sxid="7"))
    assert extraction.sxids == (((0, "0000:05:00", 7, True), 1),)
    assert extraction.unknown_values == {"duplicate": 1}


def test_series_beyond_the_bound_are_ignored() -> None:
    text = "".join(line(sxid=str(code)) for code in range(MAX_SXID_SERIES + 2))
    extraction = parse_cards(text)
    assert len(extraction.sxids) == MAX_SXID_SERIES
    assert extraction.ignored_series == {"sxid_series_limit": 2}


_LABEL = st.text(alphabet=st.sampled_from(list("0129aAfF:._- x")), max_size=14)


@QUICK
@given(switch=_LABEL, pci=st.sampled_from(["0000:05:00", "0000:0A:00.1"]) | _LABEL, sxid=_LABEL,
       severity=st.sampled_from(["fatal", "non_fatal", "Fatal", "", "x"]), value=VALUES)
def test_any_series_is_read_or_counted_and_zero_only_for_a_zero(
        switch: str, pci: str, sxid: str, severity: str, value: str) -> None:
    try:
        extraction = parse_cards(line(value, switch=switch, pci=pci, sxid=sxid,
                                      severity=severity))
    except ParseError:
        return
    counted = sum(extraction.ignored_series.values()) + sum(extraction.unknown_values.values())
    assert len(extraction.sxids) + counted == 1  # read, or left out and counted: never lost
    for (number, bus, code, fatal), count in extraction.sxids:
        assert (str(number), str(code)) == (switch.lstrip("0") or "0", sxid.lstrip("0") or "0")
        assert bus == pci.lower() and fatal == (severity == "fatal")
        assert count == parse_value(value.strip())  # 0 only for a literal zero


@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    database = new_db("sxid")
    yield database
    database.close()


def key(sxid: int = 20034, node: str = "n1", source: str = "real", switch: int = 0) -> SxidKey:
    return SxidKey(node, source, switch, "0000:05:00", sxid, True)


def row(count: int, minutes: float = 0, **kw: object) -> SxidSample:
    return SxidSample(key(**kw), T0 + timedelta(minutes=minutes), count)  # type: ignore[arg-type]


def test_write_rule() -> None:
    assert decide_sxid(row(0), None) is SxidReason.FIRST
    assert decide_sxid(row(1, 60 * 24 * 30), row(1)) is SxidReason.UNCHANGED  # no keep-alive
    assert decide_sxid(row(2, 1), row(1)) is SxidReason.CHANGED
    assert decide_sxid(row(0, 1), row(3)) is SxidReason.CHANGED  # exporter restart: written


class Node:
    """One exporter target, its expositions parsed and ingested through a real Ingestor."""

    def __init__(self, db: Database, cache: SxidDedupCache | None = None) -> None:
        self.clock = FakeClock()
        self.ingestor = Ingestor(db, DedupCache(), keepalive=timedelta(minutes=5),
                                 sxid_cache=cache)
        self.target = Target("127.0.0.1:1", "n1")

    async def scrape(self, text: str) -> dict[str, int]:
        self.clock.advance(minutes=1)
        result = ScrapeResult(self.target, self.clock(), 0.01, parse_cards(CARD + text))
        report = await self.ingestor.ingest([result])
        return {k: v for k, v in report.decisions.items() if k.startswith("sxid_")}


def history(db: Database, sxid: int = 20034) -> list[tuple[int, bool, int]]:
    rows = db.fetchall("SELECT nvswitch, fatal, count FROM gpu_health_sxid_samples "
                       "WHERE sxid = $sxid ORDER BY sampled_at, nvswitch", {"sxid": sxid})
    return [(int(r[0]), bool(r[1]), int(r[2])) for r in rows]


async def test_change_only_with_exporter_restarts(db: Database) -> None:
    node = Node(db)
    assert await node.scrape("") == {}  # no switch logged an error: no series, nothing written
    assert await node.scrape(line("1")) == {"sxid_first": 1}
    assert await node.scrape(line("1")) == {"sxid_unchanged": 1}
    assert await node.scrape(line("3") + line("1", switch="2")) == {"sxid_changed": 1,
                                                                      "sxid_first": 1}
    # kernel log unreadable: the series are gone, nothing is written (unknown, never 0)
    assert await node.scrape("") == {}
    assert await node.scrape(line("0", switch="2")) == {"sxid_changed": 1}  # a restart
    assert history(db) == [(0, True, 1), (0, True, 3), (2, True, 1), (2, True, 0)]


async def test_a_new_ingestor_reads_the_stored_base(db: Database) -> None:
    await Node(db).scrape(line("2"))
    restarted = Node(db)
    restarted.clock.advance(minutes=5)
    assert await restarted.scrape(line("2")) == {"sxid_unchanged": 1}
    assert history(db) == [(0, True, 2)]


async def test_small_cache_costs_one_select_per_cycle(db: Database) -> None:
    node = Node(db, SxidDedupCache(max_entries=1))
    text = line("1") + line("1", sxid="1") + line("1", sxid="2")
    await node.scrape(text)
    before = db.statements
    assert await node.scrape(text) == {"sxid_unchanged": 3}
    assert db.statements - before == 1  # the one SELECT for the missed series


def test_latest_rows_are_found_whatever_their_age(db: Database) -> None:
    write_cycle(db, [], sxids=[row(0), row(2, 60 * 24 * 200), row(5, sxid=1), row(7, node="n2"),
                               row(1, source="simulated")])
    latest = latest_sxid_rows(db, [key(), key(1), key(node="n2"), key(9),
                                   key(source="simulated")])
    assert {k: v.count for k, v in latest.items()} == {
        key(): 2, key(1): 5, key(node="n2"): 7, key(source="simulated"): 1}
    assert latest[key()].sampled_at == T0 + timedelta(days=200)


def test_retention_keeps_each_series_newest_row(db: Database) -> None:
    write_cycle(db, [], sxids=[row(0), row(1, 10), row(2, 20),  # two old rows go
                               row(4, sxid=1),  # unchanged since: its only row stays
                               row(3, 60 * 24 * 10)])  # newest, after the cutoff
    deleted = delete_samples_before(db, T0 + timedelta(days=1))
    assert (deleted.samples, deleted.xid_samples, deleted.sxid_samples) == (0, 0, 3)
    rows = db.fetchall("SELECT sxid, count, sampled_at FROM gpu_health_sxid_samples ORDER BY 1")
    assert [(r[0], r[1]) for r in rows] == [(1, 4), (20034, 3)]
    assert from_naive_utc(rows[0][2]) == T0  # older than the cutoff, kept as the base


def test_purge_removes_simulated_rows_only(db: Database) -> None:
    write_cycle(db, [], sxids=[row(0), row(1, source="simulated"), row(2, 5, source="simulated")])
    purge_simulated(db)
    assert [r[0] for r in db.fetchall("SELECT source FROM gpu_health_sxid_samples")] == ["real"]


def test_an_unfinished_history_import_takes_its_real_rows_back(db: Database) -> None:
    import_marker.begin(db, T0, T0 - timedelta(days=1), T0)
    write_cycle(db, [], sxids=[row(1), row(1, source="simulated")])
    import_marker.undo(db)
    assert [r[0] for r in db.fetchall("SELECT source FROM gpu_health_sxid_samples")] == [
        "simulated"]


def test_sxid_rows_commit_with_the_samples_or_not_at_all(db: Database) -> None:
    bad = row(-1)  # the CHECK (count >= 0) refuses it
    with pytest.raises(StoreError):
        write_cycle(db, [Sample(CardKey("n1", 0), "GPU-a", T0, a100(1))], sxids=[bad])
    assert count_samples(db) == 0
    assert db.fetchall("SELECT count(*) FROM gpu_health_sxid_samples") == [(0,)]
