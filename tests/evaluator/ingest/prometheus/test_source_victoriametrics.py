"""The Prometheus source against a real VictoriaMetrics holding 10 days of dcgm-exporter history.

The history is loaded with VictoriaMetrics' import API: four A100-like cards on two nodes (the
old ``Hostname`` and the new ``hostname`` label), values from the project's card profiles
(degrading then failing, healthy, a sudden uncorrectable error, a two-day collection stall),
written with dcgm-exporter's names. Like its default counters file, no retired-pages and no
row-remap-pending series exist; one card prints the no-data sentinel for its DBE counter, as
dcgm-exporter before 3.x did. The evaluator runs with an injected clock 10 days after the start
of the data: it imports the history on first start, replays, then reads live cycles.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_health.clock import to_naive_utc
from gpu_health.errors import SourceError
from gpu_health.evaluator.backtest.prometheus import PrometheusRange, import_prometheus
from gpu_health.evaluator.compose import Service, build_service
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.ingest.prometheus.metricsets import DCGM
from gpu_health.evaluator.main import main
from gpu_health.evaluator.model import CardKey
from gpu_health.evaluator.simulate.profiles import readings
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.statistics.api_queries import capabilities
from tests.evaluator.ingest.prometheus.servers import (
    VM,
    VM_MISSING,
    Switch,
    loaded_victoria_metrics,
)

pytestmark = pytest.mark.skipif(VM is None, reason=VM_MISSING)

STEP = timedelta(minutes=1)
DAY0 = datetime.fromtimestamp((int(time.time()) // 86400 - 12) * 86400, UTC)
DATA_END = DAY0 + timedelta(days=10, hours=3)
START = DAY0 + timedelta(days=10, minutes=3)  # the evaluator's clock when it starts
SENTINEL = "9223372036854775794"  # DCGM_INT64_NOT_SUPPORTED, as old dcgm-exporters print it
RULES = Path(__file__).parents[4] / "rules" / "v2-ecc-xid.yaml"
# (node, index, profile, node label, days the profile started before DAY0)
CARDS = (("n1", 0, "degrading", "Hostname", 0), ("n1", 1, "healthy", "Hostname", 0),
         ("n2", 0, "uncorrectable", "hostname", 0), ("n2", 1, "stall", "hostname", 0),
         ("n3", 0, "uncorrectable", "hostname", 5),  # its error on day 1: a window long over
         ("n3", 1, "card_swap", "hostname", 3))  # a new card (new UUID) in the slot on day 4


def _lines() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for node, gpu, profile, host_label, early in CARDS:
        by_uuid: dict[str, list[Any]] = {}
        for s in readings(profile, CardKey(node, gpu), DAY0 - timedelta(days=early), DATA_END,
                          STEP, seed=3):
            if s.sampled_at >= DAY0:
                by_uuid.setdefault(s.gpu_uuid or "", []).append(s)
        for uuid, samples in by_uuid.items():
            labels = {"gpu": str(gpu), "UUID": uuid, host_label: node, "device": f"nvidia{gpu}",
                      "modelName": "NVIDIA A100-SXM4-80GB", "instance": f"{node}:9400",
                      "job": "dcgm"}
            ts = [int(s.sampled_at.timestamp() * 1000) for s in samples]
            sbe = [s.counters.ecc_corrected_total for s in samples]
            dbe: list[Any] = [s.counters.ecc_uncorrected_total for s in samples]
            if (node, gpu) == ("n1", 1):
                dbe = [float(SENTINEL)] * len(samples)
            xid = [48 if (node == "n2" and s.counters.ecc_uncorrected_total) else 0
                   for s in samples]
            for name, values in (("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", sbe),
                                 ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", dbe),
                                 ("DCGM_FI_DEV_ROW_REMAP_FAILURE", [0] * len(samples)),
                                 ("DCGM_FI_DEV_XID_ERRORS", xid)):
                out.append({"metric": {"__name__": name, **labels}, "values": values,
                            "timestamps": ts})
    return out


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from loaded_victoria_metrics(tmp_path_factory, _lines())


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def service(tmp: Path, url: str, clock: Clock, name: str, **extra: Any) -> Service:
    prom = {"url": url, "metrics": "dcgm", "step": "60s", "lag": "2m", "max_catchup": "30m",
            "history": "10d", **extra}
    config = parse_config({"storage": {"path": f"{name}.duckdb"},
                           "web": {"listen_address": "127.0.0.1:0"},
                           "ingest": {"source": "prometheus", "prometheus": prom}}, base=tmp)
    return build_service(config, {}, clock=clock, start_loops=False)


async def started(svc: Service) -> None:
    """Start hooks (the history import is due: the store is empty), then the import itself."""
    await svc.app.open()
    assert svc.bootstrap is not None and svc.source is not None
    assert svc.bootstrap.running and "importing history" in (svc.source.not_ready() or "")
    assert await svc.source.run_cycle() is None  # the live source waits for the history
    await svc.bootstrap.run()
    assert svc.source.not_ready() is None


async def live(svc: Service, clock: Clock, minutes: int) -> None:
    """``minutes`` live cycles, each followed by the worker tick, one minute apart."""
    assert svc.source is not None
    for _ in range(minutes):
        clock.now += STEP
        await svc.source.run_cycle()
        await svc.app.run_tick("worker")


def table(db: Database, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.fetchall(sql)]


PREDICTIONS = ("SELECT id, node_id, gpu_index, gpu_uuid, rule_version, t0, window_end, "
               "predicted_at, signal, status, resolved_at, outcome FROM gpu_health_predictions "
               "WHERE rule_version = 'v2-ecc-xid' ORDER BY id")
SAMPLES = ("SELECT node_id, gpu_index, gpu_uuid, sampled_at, ecc_uncorrected_total, "
           "ecc_corrected_total, retired_pages, remapped_rows_pending, remapped_rows_failure "
           "FROM gpu_health_samples ORDER BY ALL")


def test_history_replay_equals_the_backtest_and_two_evaluators_agree(
        vm: str, tmp_path: Path) -> None:
    clock_a, clock_b = Clock(START), Clock(START)
    a = service(tmp_path, vm, clock_a, "a")
    b = service(tmp_path, vm, clock_b, "b")

    async def run() -> None:
        for svc, clock in ((a, clock_a), (b, clock_b)):
            await started(svc)
            await live(svc, clock, 5)

    asyncio.run(run())
    assert a.bootstrap is not None and a.bootstrap.period is not None
    since, until = a.bootstrap.period
    assert until == START - timedelta(minutes=2) and since == until - timedelta(days=10) + STEP
    rows = table(a.db, PREDICTIONS)
    assert {r[9] for r in rows} >= {"hit", "pending"}, rows
    assert table(b.db, PREDICTIONS) == rows  # same ids, windows, outcomes
    assert table(b.db, SAMPLES) == table(a.db, SAMPLES)
    # The backtest on the same data and period makes the same predictions.
    out = tmp_path / "report.json"
    assert main(["backtest", "--prometheus", vm, "--metrics", "dcgm",
                 "--since", since.isoformat(), "--until", until.isoformat(),
                 "--db", str(tmp_path / "bt.duckdb"), "--rules", str(RULES),
                 "--no-baselines", "--no-progress", "--output", str(out)]) == 0
    bt = DuckDBDatabase(tmp_path / "bt.duckdb")
    replayed = [r for r in rows if r[7] <= until]
    backtest_rows = table(bt, PREDICTIONS)
    assert backtest_rows
    # Same predictions; outcomes equal where the backtest's period already decided them.
    assert [r[:9] for r in backtest_rows] == [r[:9] for r in replayed]
    bt.close()
    for svc in (a, b):
        asyncio.run(svc.app.close())


def test_only_predictions_with_an_open_window_alert(vm: str, tmp_path: Path) -> None:
    clock = Clock(START)
    svc = service(tmp_path, vm, clock, "alerts")

    async def run() -> None:
        await started(svc)
        await svc.app.run_tick("alerts")

    asyncio.run(run())
    cut = to_naive_utc(START)
    ended = table(svc.db, "SELECT id FROM gpu_health_predictions WHERE window_end <= "
                          f"TIMESTAMP '{cut}'")
    assert ended  # n3's first window (day 1 + 7 days) was over before the evaluator started
    alerted = table(svc.db, "SELECT p.id, p.window_end FROM gpu_health_alerts a JOIN "
                            "gpu_health_predictions p ON p.id = a.prediction_id")
    assert alerted and all(end > START for _, end in alerted)
    assert not {r[0] for r in ended} & {r[0] for r in alerted}
    # Every node with a window still open has its alert.
    assert table(svc.db, "SELECT DISTINCT node_id FROM gpu_health_predictions WHERE window_end "
                         f"> TIMESTAMP '{cut}' EXCEPT SELECT node_id FROM gpu_health_alerts") == []
    asyncio.run(svc.app.close())


def test_unknown_stays_null_and_a_gap_stays_a_gap(vm: str, tmp_path: Path) -> None:
    clock = Clock(START)
    svc = service(tmp_path, vm, clock, "u")
    asyncio.run(started(svc))
    db = svc.db
    # No retired-pages or row-remap-pending series (dcgm's defaults): NULL, never 0.
    assert table(db, "SELECT count(*) FROM gpu_health_samples WHERE retired_pages IS NOT NULL "
                     "OR remapped_rows_pending IS NOT NULL") == [(0,)]
    # The no-data sentinel is unknown, never a count.
    assert table(db, "SELECT count(*), count(ecc_uncorrected_total) FROM gpu_health_samples "
                     "WHERE node_id = 'n1' AND gpu_index = 1")[0][1] == 0
    assert table(db, "SELECT max(ecc_uncorrected_total) FROM gpu_health_samples") < [(10**6,)]
    # The stall card (no data from day 4 to day 6) has no row inside the stall.
    stall = [to_naive_utc(DAY0 + timedelta(days=d)) for d in (4 + 10 / 1440, 6)]
    inside = table(db, "SELECT count(*) FROM gpu_health_samples WHERE node_id = 'n2' AND "
                       f"gpu_index = 1 AND sampled_at > TIMESTAMP '{stall[0]}' "
                       f"AND sampled_at < TIMESTAMP '{stall[1]}'")
    assert inside == [(0,)]
    # The capability matrix says unknown for what dcgm's default fields do not give.
    caps = {(c.node_id, c.gpu_index): c for c in capabilities(db, source="real", now=START)}
    assert caps[("n1", 0)].collectable == {
        "ecc_uncorrected_total": True, "ecc_corrected_total": True, "retired_pages": False,
        "remapped_rows_pending": False, "remapped_rows_failure": True}
    assert caps[("n1", 1)].collectable["ecc_uncorrected_total"] is False  # only sentinels
    # The swapped card: two UUIDs in the slot, each its own rows from the swap on.
    uuids = table(db, "SELECT gpu_uuid, min(sampled_at), max(sampled_at) FROM "
                      "gpu_health_samples WHERE node_id = 'n3' AND gpu_index = 1 GROUP BY 1 "
                      "ORDER BY 2")
    assert len(uuids) == 2 and uuids[0][2] < uuids[1][1]
    assert caps[("n3", 1)].gpu_uuid == uuids[1][0]
    # Both spellings of the hostname label name the node.
    assert {r[0] for r in table(db, "SELECT DISTINCT node_id FROM gpu_health_samples")} == \
        {"n1", "n2", "n3"}
    asyncio.run(svc.app.close())


def test_outage_fails_cycles_then_catches_up_without_losing_a_point(
        vm: str, tmp_path: Path) -> None:
    switch = Switch(vm).start()
    try:
        ref_clock, clock = Clock(START), Clock(START)
        ref = service(tmp_path, vm, ref_clock, "ref", history="1d")
        svc = service(tmp_path, switch.url, clock, "out", history="1d")

        async def run() -> None:
            await started(ref)
            await started(svc)
            await live(ref, ref_clock, 12)
            assert svc.source is not None
            for mode, reason in (("503", "http_error"), ("down", "unreachable")):
                switch.mode = mode
                for _ in range(5):
                    clock.now += STEP
                    with pytest.raises(SourceError) as err:
                        await svc.source.run_cycle()
                    assert err.value.reason == reason
                    await svc.app.run_tick("ingest")  # the loop's catch-all counts it too
                assert reason in (svc.source.not_ready() or "")
            clock.now += 2 * STEP
            switch.mode = "up"
            report = await svc.source.run_cycle()  # catches up the 12 steps at once
            assert report is not None and svc.source.not_ready() is None

        asyncio.run(run())
        assert table(svc.db, SAMPLES) == table(ref.db, SAMPLES)
        metrics = svc.app.registry
        assert metrics.get_sample_value("gpu_health_evaluator_source_errors_total",
                                        {"reason": "http_error"}) == 10
        assert metrics.get_sample_value("gpu_health_evaluator_source_errors_total",
                                        {"reason": "unreachable"}) == 10
        assert metrics.get_sample_value("gpu_health_evaluator_loop_errors_total",
                                        {"loop": "ingest", "reason": "unreachable"}) == 5
        for s in (ref, svc):
            asyncio.run(s.app.close())
    finally:
        switch.stop()


def test_an_outage_longer_than_max_catchup_leaves_a_gap(vm: str, tmp_path: Path) -> None:
    clock = Clock(START)
    svc = service(tmp_path, vm, clock, "gap", history="1d")

    async def run() -> None:
        await started(svc)
        clock.now += timedelta(hours=2)  # max_catchup is 30 min
        assert svc.source is not None
        await svc.source.run_cycle()

    asyncio.run(run())
    until = START - timedelta(minutes=2)
    resumed = until + timedelta(hours=2) - timedelta(minutes=29)
    assert table(svc.db, "SELECT count(*) FROM gpu_health_samples WHERE sampled_at > "
                         f"TIMESTAMP '{to_naive_utc(until)}' AND sampled_at < "
                         f"TIMESTAMP '{to_naive_utc(resumed)}'") == [(0,)]
    assert table(svc.db, "SELECT min(sampled_at) FROM gpu_health_samples WHERE sampled_at > "
                         f"TIMESTAMP '{to_naive_utc(until)}'") == [(resumed,)]
    assert svc.app.registry.get_sample_value(
        "gpu_health_evaluator_source_steps_skipped_total") == 90
    asyncio.run(svc.app.close())


def test_change_points_give_the_rows_of_reading_every_step(vm: str, tmp_path: Path) -> None:
    """The history import reads only change points (``ingest/prometheus/changes.py``); the live
    source reads every step and takes the scrape path's ingestor. Over 3.5 days with a
    collection gap, a sudden uncorrectable error and a card that prints the no-data sentinel,
    both store the same rows (chunks of 700 steps: the change state crosses chunk edges)."""
    since, until = DAY0 + timedelta(days=3, minutes=1), DAY0 + timedelta(days=6, hours=12)
    imported = DuckDBDatabase(tmp_path / "import.duckdb")
    asyncio.run(import_prometheus(imported, PrometheusRange(
        url=vm, metrics=DCGM, since=since, until=until, step=STEP, max_points=700),
        timedelta(minutes=5)))
    clock = Clock(until + timedelta(minutes=2))
    svc = service(tmp_path, vm, clock, "steps", max_catchup="4d", history=None)

    async def run() -> None:
        await svc.app.open()
        assert svc.source is not None
        svc.source.resume_at(since - STEP)
        await svc.source.run_cycle()
        await svc.app.close()

    asyncio.run(run())
    step_rows = DuckDBDatabase(tmp_path / "steps.duckdb")
    assert len(table(imported, SAMPLES)) > 4000
    assert table(imported, SAMPLES) == table(step_rows, SAMPLES)
    # XID rows too: dcgm's last-value gauge on n2/0 goes 0 -> 48 on day 6, one event.
    xids = "SELECT * FROM gpu_health_xid_samples ORDER BY ALL"
    assert table(imported, xids) == table(step_rows, xids)
    assert table(imported, "SELECT count FROM gpu_health_xid_samples WHERE node_id = 'n2' AND "
                           "gpu_index = 0 AND xid = 48 ORDER BY sampled_at") == [(0,), (1,)]


def test_a_failed_history_import_is_undone_and_retried(vm: str, tmp_path: Path) -> None:
    """The 20th request fails half-way through the import (a chunk is already written): the
    rows are deleted, the failure counted, and the retry imports exactly what a clean import
    does."""
    switch = Switch(vm, fail_requests={20}).start()
    try:
        clean_clock, clock = Clock(START), Clock(START)
        clean = service(tmp_path, vm, clean_clock, "clean", history="3d")
        flaky = service(tmp_path, switch.url, clock, "flaky", history="3d")
        assert flaky.bootstrap is not None
        flaky.bootstrap.retry = timedelta(0)

        async def run() -> None:
            await started(clean)
            await started(flaky)

        asyncio.run(run())
        assert switch.requests > 20
        assert flaky.app.registry.get_sample_value(
            "gpu_health_evaluator_source_errors_total", {"reason": "http_error"}) == 1
        assert table(flaky.db, SAMPLES) == table(clean.db, SAMPLES)
        assert table(flaky.db, PREDICTIONS) == table(clean.db, PREDICTIONS)
        for s in (clean, flaky):
            asyncio.run(s.app.close())
    finally:
        switch.stop()


def test_the_history_replay_includes_the_shadow_versions(vm: str, tmp_path: Path) -> None:
    eager = tmp_path / "v2-eager.yaml"
    eager.write_text(RULES.read_text().replace("version: v2-ecc-xid", "version: v2-eager")
                     .replace("min_increase: 32", "min_increase: 4"))
    clock = Clock(START)
    prom = {"url": vm, "metrics": "dcgm", "step": "60s", "lag": "2m", "max_catchup": "30m",
            "history": "10d"}
    config = parse_config({"storage": {"path": "shadow.duckdb"},
                           "web": {"listen_address": "127.0.0.1:0"},
                           "rules": {"shadow": ["v2-eager.yaml"]},
                           "ingest": {"source": "prometheus", "prometheus": prom}}, base=tmp_path)
    svc = build_service(config, {}, clock=clock, start_loops=False)

    async def run() -> None:
        await svc.app.open()
        await svc.app.run_tick("prediction_state")  # /metrics' figures before the history
        before = svc.prediction_state.collector.snapshot
        assert before is not None and svc.bootstrap is not None
        await svc.bootstrap.run()
        # They showed the shadow's outcomes as 0 for about ten snapshot periods after the
        # replay; now the replay's end refreshes them at once (no tick ran in between).
        after = svc.prediction_state.collector.snapshot
        assert after is not None and after is not before
        assert {v: s for v, _, s in after.versions} != {v: s for v, _, s in before.versions}
        await svc.app.run_tick("alerts")

    asyncio.run(run())
    by_version = dict(table(svc.db, "SELECT rule_version, bool_and(shadow) FROM "
                                    "gpu_health_predictions GROUP BY 1"))
    assert by_version == {"v2-ecc-xid": False, "v2-eager": True}
    assert table(svc.db, "SELECT count(*) FROM gpu_health_predictions p JOIN "
                         "gpu_health_alerts a ON a.prediction_id = p.id WHERE p.shadow") == [(0,)]
    asyncio.run(svc.app.close())


def test_an_import_the_process_did_not_finish_is_redone_at_the_next_start(
        vm: str, tmp_path: Path) -> None:
    """Before: a SIGTERM at chunk 12 of 15 left real rows, so the next start took the half
    import for history and the live source skipped what lay behind max_catchup. The process
    here stops (its task cancelled, nothing undone) once rows are written; the next start on
    the same file removes them and imports exactly what a clean import does."""
    clean = service(tmp_path, vm, Clock(START), "clean2", history="3d")
    cut = service(tmp_path, vm, Clock(START), "cut", history="3d")

    async def stop_half_way() -> None:
        await cut.app.open()
        assert cut.bootstrap is not None
        task = asyncio.create_task(cut.bootstrap.run())
        while not await cut.db.run(lambda: table(cut.db, "SELECT count(*) FROM "
                                                        "gpu_health_samples")[0][0]):
            await asyncio.sleep(0.01)  # waiting for the import task to write, not for time
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert table(cut.db, "SELECT count(*) FROM gpu_health_history_imports "
                             "WHERE completed_at IS NULL") == [(1,)]
        await cut.app.close()  # closes the store too

    asyncio.run(stop_half_way())
    again = service(tmp_path, vm, Clock(START), "cut", history="3d")

    async def run() -> None:
        await started(clean)
        await started(again)  # asserts that the import is due again and completes

    asyncio.run(run())
    assert table(again.db, SAMPLES) == table(clean.db, SAMPLES)
    assert table(again.db, PREDICTIONS) == table(clean.db, PREDICTIONS)
    assert table(again.db, "SELECT count(*) FROM gpu_health_history_imports "
                           "WHERE completed_at IS NOT NULL") == [(1,)]
    for s in (clean, again):
        asyncio.run(s.app.close())
