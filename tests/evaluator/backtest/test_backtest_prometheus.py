"""Prometheus import against a real Prometheus (the Debian package's /usr/bin/prometheus).

Its TSDB is built with ``promtool tsdb create-blocks-from openmetrics`` from OpenMetrics text
written here: three days of 60-second samples ten days in the past (blocks must be older than
the head), for our metric names, dcgm-exporter's and nvidia_gpu_exporter's, including a
three-hour collection gap that must stay a gap. Prometheus serves it on a free 127.0.0.1 port
with a retention long enough that nothing is deleted.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest

from gpu_health.clock import from_naive_utc
from gpu_health.evaluator.backtest.prometheus import PrometheusRange, chunks, import_prometheus
from gpu_health.evaluator.ingest.prometheus.metricsets import DCGM, NVIDIA_SMI, OURS, MetricSet
from gpu_health.evaluator.ingest.write_rule import decide
from gpu_health.evaluator.main import main
from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.backtest_support import V1_FILE

pytestmark = pytest.mark.skipif(
    not (shutil.which("prometheus") and shutil.which("promtool")),
    reason="prometheus and promtool binaries (Debian package 'prometheus') are not installed")

MINUTES = 3 * 1440
DAY0 = datetime.fromtimestamp((int(time.time()) // 86400 - 10) * 86400, UTC)
GAP = range(30 * 60, 33 * 60)  # minutes 1800..1979: no samples of GPU-b
STEP = timedelta(minutes=1)
KEEP = timedelta(minutes=5)
LOOKBACK = 5  # minutes: Prometheus's default query.lookback-delta


def visible(m: int) -> bool:
    """Whether a step at minute ``m`` finds a sample of GPU-b within the lookback."""
    return m not in GAP or m - (GAP.start - 1) <= LOOKBACK

Value = Callable[[int], float | None]  # minute -> value (None: no sample)


def ours_series() -> list[tuple[str, str, Value]]:
    a = 'gpu="0",uuid="GPU-a",node="n1",vendor="nvidia",instance="10.0.0.1:10346",job="gpu"'
    b = 'gpu="1",uuid="GPU-b",node="n1",vendor="nvidia",instance="10.0.0.1:10346",job="gpu"'
    c = 'gpu="0",uuid="GPU-c",vendor="nvidia",instance="10.0.0.9:10346",job="gpu"'
    return [
        ("gpu_health_ecc_corrected_total", a, lambda m: m // 100),
        ("gpu_health_ecc_uncorrected_total", a, lambda m: 0 if m < 2000 else 1),
        ("gpu_health_retired_pages", a, lambda m: 3),
        ("gpu_health_ecc_corrected_total", b, lambda m: None if m in GAP else 7),
        ("gpu_health_ecc_uncorrected_total", b, lambda m: None if m in GAP else 0),
        ("gpu_health_ecc_corrected_total", c, lambda m: float("nan") if m < 60 else 5),
        # a node's NVSwitch: first error at minute 1000, the log unreadable (no series) for two
        # hours, a second error at 2500
        ("gpu_health_nvswitch_sxid_errors_total", SXID, sxid_count),
    ]


SXID = ('nvswitch="2",pci_bus_id="0000:0c:00",sxid="20034",severity="fatal",node="n1",'
        'instance="10.0.0.1:10346",job="gpu"')


def sxid_count(m: int) -> float | None:
    return None if m < 1000 or 1200 <= m < 1320 else 1 if m < 2500 else 2


def dcgm_series() -> list[tuple[str, str, Value]]:
    d = 'gpu="0",UUID="GPU-d",device="nvidia0",Hostname="h1",instance="10.0.1.1:9400"'
    e = 'gpu="1",UUID="GPU-e",device="nvidia1",Hostname="h1",instance="10.0.1.1:9400"'
    return [
        ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", d, lambda m: m // 60),
        ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", d, lambda m: 0),
        ("DCGM_FI_DEV_RETIRED_SBE", d, lambda m: 1),
        ("DCGM_FI_DEV_RETIRED_DBE", d, lambda m: 2),
        ("DCGM_FI_DEV_ROW_REMAP_PENDING", d, lambda m: 0),
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", d, lambda m: 0),
        ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", e, lambda m: 4),
        ("DCGM_FI_DEV_RETIRED_SBE", e, lambda m: 1),  # no RETIRED_DBE: the sum is unknown
    ]


def nvidia_smi_series() -> list[tuple[str, str, Value]]:
    f = 'uuid="GPU-f",instance="10.0.2.1:10346"'
    return [
        ("nvidia_smi_gpu_info", f + ',index="2",name="NVIDIA H100"', lambda m: 1),
        ("nvidia_smi_ecc_errors_corrected_aggregate_total", f, lambda m: m // 720),
        ("nvidia_smi_ecc_errors_uncorrected_aggregate_total", f, lambda m: 0),
        ("nvidia_smi_ecc_errors_corrected_aggregate_total",
         'uuid="GPU-x",instance="10.0.2.1:10346"', lambda m: 1),  # no gpu_info: no identity
    ]


def openmetrics() -> str:
    """Families one after the other; within a family, samples in time order."""
    families: dict[str, list[tuple[str, Value]]] = {}
    for name, labels, value in ours_series() + dcgm_series() + nvidia_smi_series():
        families.setdefault(name, []).append((labels, value))
    lines = []
    for name, members in families.items():
        lines.append(f"# TYPE {name} gauge")
        for m in range(MINUTES):
            ts = int((DAY0 + m * STEP).timestamp())
            for labels, value in members:
                v = value(m)
                if v is not None:
                    lines.append(f"{name}{{{labels}}} {v} {ts}")
    return "\n".join(lines) + "\n# EOF\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    """Poll /-/ready until Prometheus has loaded the blocks (a condition, not a time)."""
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            if process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {process.returncode}")
            try:
                async with session.get(url + "/-/ready") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError("prometheus did not become ready")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("prometheus")
    (tmp / "history.om").write_text(openmetrics())
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics",
                    str(tmp / "history.om"), str(tmp / "data")], check=True,
                   capture_output=True)
    (tmp / "prometheus.yml").write_text("global: {}\n")
    port = free_port()
    process = subprocess.Popen(
        ["prometheus", f"--config.file={tmp / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp / 'data'}", "--storage.tsdb.retention.time=100y",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp / "prometheus.log").open("wb"))
    url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(wait_ready(url, process))
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def source(url: str, ms: MetricSet, max_points: int = 10_000) -> PrometheusRange:
    return PrometheusRange(url=url, metrics=ms, since=DAY0,
                            until=DAY0 + (MINUTES - 1) * STEP, step=STEP, max_points=max_points)


def imported(tmp_path: Path, src: PrometheusRange, name: str = "bt.duckdb") -> Database:
    db = DuckDBDatabase(tmp_path / name)
    asyncio.run(import_prometheus(db, src, KEEP))
    return db


def rows(db: Database, node: str, gpu: int) -> list[tuple[object, ...]]:
    return [(from_naive_utc(r[0]), *r[1:]) for r in db.fetchall(
        "SELECT sampled_at, gpu_uuid, ecc_uncorrected_total, ecc_corrected_total, retired_pages, "
        "remapped_rows_pending, remapped_rows_failure FROM gpu_health_samples "
        "WHERE node_id = $node AND gpu_index = $gpu ORDER BY sampled_at",
        {"node": node, "gpu": gpu})]


def expected(uuid: str, values: Callable[[int], Counters | None]) -> list[tuple[object, ...]]:
    """Every 60-s reading through the live write rule; a reading inside the gap is absent once
    Prometheus's 5-minute lookback has run out."""
    out: list[tuple[object, ...]] = []
    last: Sample | None = None
    for m in range(MINUTES):
        counters = values(m)
        if counters is None:
            continue
        sample = Sample(CardKey("x", 0), uuid, DAY0 + m * STEP, counters)
        if decide(sample, last, KEEP).write:
            last = sample
            out.append((sample.sampled_at, uuid, *counters.as_tuple()))
    return out


def test_our_metric_names_keep_gaps_and_unknowns(prometheus: str, tmp_path: Path) -> None:
    db = imported(tmp_path, source(prometheus, OURS))
    assert rows(db, "n1", 0) == expected(
        "GPU-a", lambda m: Counters(0 if m < 2000 else 1, m // 100, 3))
    # the gap: Prometheus still answers LOOKBACK minutes into it (its lookback), then nothing
    assert rows(db, "n1", 1) == expected("GPU-b", lambda m: Counters(0, 7) if visible(m)
                                         else None)
    stored = [r[0] for r in rows(db, "n1", 1)]
    assert all(isinstance(t, datetime) for t in stored)
    gaps = [b - a for a, b in itertools.pairwise(stored)]  # type: ignore[operator]
    assert max(gaps) > timedelta(hours=2)
    # no node label: the host of instance; NaN is unknown, so the first hour has no row
    c = rows(db, "10.0.0.9", 0)
    assert c[0][0] == DAY0 + timedelta(minutes=60) and c[0][1:4] == ("GPU-c", None, 5)
    db.close()


def test_our_nvswitch_sxids_are_imported_change_only(prometheus: str, tmp_path: Path) -> None:
    db = imported(tmp_path, source(prometheus, OURS))
    stored = db.fetchall("SELECT node_id, source, nvswitch, pci_bus_id, sxid, fatal, sampled_at, "
                         "count FROM gpu_health_sxid_samples ORDER BY sampled_at")
    key = ("n1", "real", 2, "0000:0c:00", 20034, True)
    # the gap writes nothing (unknown, never 0) and the same count after it is no change
    assert [(*r[:6], from_naive_utc(r[6]), r[7]) for r in stored] == [
        (*key, DAY0 + 1000 * STEP, 1), (*key, DAY0 + 2500 * STEP, 2)]
    db.close()


def test_dcgm_names_and_identity_labels(prometheus: str, tmp_path: Path) -> None:
    db = imported(tmp_path, source(prometheus, DCGM))
    d = rows(db, "h1", 0)
    assert d == expected("GPU-d", lambda m: Counters(0, m // 60, 3, 0, 0))
    e = rows(db, "h1", 1)
    assert {r[1:] for r in e} == {("GPU-e", None, 4, None, None, None)}  # retired: unknown
    db.close()


def test_nvidia_smi_names_take_the_index_from_gpu_info(prometheus: str, tmp_path: Path) -> None:
    db = imported(tmp_path, source(prometheus, NVIDIA_SMI))
    assert rows(db, "10.0.2.1", 2) == expected("GPU-f", lambda m: Counters(0, m // 720))
    assert db.fetchone("SELECT count(DISTINCT gpu_uuid) FROM gpu_health_samples")[0] == 1
    db.close()


def test_chunks_stay_under_the_point_limit() -> None:
    pieces = chunks(DAY0, DAY0 + timedelta(days=30), STEP, 10_000)
    assert all((b - a) / STEP + 1 <= 10_000 for a, b in pieces)
    assert pieces[0][0] == DAY0 and pieces[-1][1] == DAY0 + timedelta(days=30)
    assert all(b + STEP == c for (_, b), (c, _) in itertools.pairwise(pieces))


def test_small_chunks_and_the_real_11000_points_error_give_the_same_rows(
        prometheus: str, tmp_path: Path) -> None:
    reference = imported(tmp_path, source(prometheus, OURS), "ref.duckdb")
    small = imported(tmp_path, source(prometheus, OURS, max_points=500), "small.duckdb")
    # 10-second steps over 3 days in one request: Prometheus answers 400 "exceeded maximum
    # resolution of 11,000 points per timeseries"; the chunk is split until it is accepted
    fine = PrometheusRange(url=prometheus, metrics=OURS, since=DAY0,
                            until=DAY0 + (MINUTES - 1) * STEP, step=timedelta(seconds=10),
                            max_points=30_000)
    db = DuckDBDatabase(tmp_path / "fine.duckdb")
    stats = asyncio.run(import_prometheus(db, fine, KEEP))
    assert stats.splits >= 1
    for other in (small, db):
        for node, gpu in (("n1", 0), ("n1", 1), ("10.0.0.9", 0)):
            assert rows(other, node, gpu) == rows(reference, node, gpu)
    for x in (reference, small, db):
        x.close()


def test_backtest_command_from_prometheus(prometheus: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code = main(["backtest", "--prometheus", prometheus, "--metrics", "dcgm",
                 "--since", DAY0.isoformat(), "--until", (DAY0 + timedelta(days=3)).isoformat(),
                 "--db", str(tmp_path / "bt.duckdb"), "--rules", str(V1_FILE),
                 "--output", str(out), "--no-progress"])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["input"]["kind"] == "prometheus" and report["input"]["metrics"] == "dcgm"
    assert report["input"]["cards"] == 2
    assert report["base_rates"]["cards"] == 2
    assert report["versions"][0]["version"] == "v1-ecc-growth"
    assert report["versions"][0]["precision"] is None  # 3 days: not enough data, never 0


def test_unreachable_prometheus_is_a_clear_error_and_leaves_no_file(tmp_path: Path) -> None:
    db_path = tmp_path / "bt.duckdb"
    code = main(["backtest", "--prometheus", f"http://127.0.0.1:{free_port()}",
                 "--since", DAY0.isoformat(), "--until", (DAY0 + timedelta(hours=1)).isoformat(),
                 "--db", str(db_path), "--rules", str(V1_FILE), "--no-progress"])
    assert code == 1
    assert not db_path.exists()
