"""Two evaluator processes on one real PostgreSQL read one real VictoriaMetrics: only the leader
reads and writes; the leader is killed (SIGKILL) in the middle of an ingest cycle, inside its
fenced transaction; the other takes over and goes on after the newest step written, so every
card's stored steps are contiguous (no gap) and no step is stored twice. The database logs every
modifying statement with its evaluator's name (``log_statement = 'mod'``): the follower wrote no
reading before it led.

The series are loaded through VictoriaMetrics' import API on a 5 s grid around now, each card's
correctable count rising by one per step, so every step is a change that must be written."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.e2e.chain import REPO, console_script
from tests.e2e.stack import Procs, free_port, http, wait_for
from tests.evaluator.ingest.prometheus.servers import VM, VM_MISSING, victoria_metrics, vm_import
from tests.postgres import PASSWORD, PostgresServer

pytestmark = pytest.mark.skipif(VM is None, reason=VM_MISSING)

STEP_S = 5
TTL_S = 3.0
NODES = ("hp-1", "hp-2", "hp-3", "hp-4")
MEMBERS = ("e1", "e2")


def _series(now: datetime) -> list[dict[str, Any]]:
    start = int(now.timestamp()) // STEP_S * STEP_S - 120
    stamps = [(start + STEP_S * k) * 1000 for k in range(120)]  # 2 min before to 8 min after
    lines: list[dict[str, Any]] = []
    for node in NODES:
        for gpu in (0, 1):
            labels = {"node": node, "gpu": str(gpu), "uuid": f"GPU-{node}-{gpu}",
                      "vendor": "nvidia", "job": "gpu-health-exporter"}
            for name, values in (
                    ("gpu_health_ecc_corrected_total", [1000 + k for k in range(120)]),
                    ("gpu_health_ecc_uncorrected_total", [0] * 120),
                    ("gpu_health_remapped_rows_pending", [0] * 120),
                    ("gpu_health_remapped_rows_failure", [0] * 120)):
                metric: dict[str, str] = {"__name__": name, **labels}
                lines.append({"metric": metric, "values": values, "timestamps": stamps})
    return lines


def _config(folder: Path, member: str, port: int, pg: str, vm: str) -> Path:
    path = folder / f"{member}.yml"
    path.write_text(yaml.safe_dump({
        "storage": {"url": pg, "password_file": "pg-password", "connect_timeout": "5s"},
        "ha": {"lease_ttl": f"{TTL_S:g}s", "member_id": member},
        "web": {"listen_address": f"127.0.0.1:{port}"},
        "ingest": {"source": "prometheus", "prometheus": {
            "url": vm, "metrics": "ours", "step": f"{STEP_S}s", "lag": f"{STEP_S}s",
            "max_catchup": "30m"}},
        "rules": {"dir": str(REPO / "rules")},
    }))
    return path


class Rig:
    def __init__(self, folder: Path, server: PostgresServer, database: str, vm: str) -> None:
        self.folder, self.server, self.database, self.vm = folder, server, database, vm
        self.procs = Procs(folder)
        self.pids: dict[str, int] = {}
        self.urls = {m: f"http://127.0.0.1:{free_port()}" for m in MEMBERS}

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.server.url(self.database), autocommit=True) as con:
            return list(con.execute(query, list(args)).fetchall())

    def probe(self, query: str) -> list[tuple[Any, ...]]:
        """``sql`` before the first evaluator made the schema: no rows."""
        try:
            return self.sql(query)
        except psycopg.errors.UndefinedTable:
            return []

    def start(self, member: str) -> None:
        port = int(self.urls[member].rsplit(":", 1)[1])
        config = _config(self.folder, member, port, self.server.url(self.database,
                                                                    password=False), self.vm)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = self.procs.start(member, [console_script("gpu-health-evaluator"), "run",
                                         f"--config={config}"], env=env, cwd=self.folder)
        self.pids[member] = proc.popen.pid

    def wait(self, what: str, probe: Any, deadline_s: float = 60.0) -> Any:
        return wait_for(what, probe, deadline_s, self.procs)

    def leader(self) -> tuple[str, int] | None:
        rows = self.probe("SELECT holder, token FROM gpu_health_leases WHERE expires_at > now()")
        return (str(rows[0][0]), int(rows[0][1])) if rows and rows[0][0] else None

    def newest(self) -> datetime | None:
        rows = self.probe("SELECT max(sampled_at) FROM gpu_health_samples")
        at = rows[0][0] if rows else None
        return None if at is None else at.replace(tzinfo=UTC) if at.tzinfo is None else at

    def written_past(self, at: datetime, steps: int) -> bool | None:
        newest = self.newest()
        return (newest is not None and newest >= at + timedelta(seconds=steps * STEP_S)) or None

    def first_led(self, member: str) -> datetime:
        """When ``member`` first said it leads (its own log)."""
        for line in (self.folder / f"{member}.log").read_text(errors="replace").splitlines():
            if f"now the leader (member {member}," in line:
                return datetime.strptime(line.split()[0].removeprefix("ts="),
                                         "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        raise AssertionError(f"{member} never led")

    def sample_writes(self, member: str) -> list[datetime]:
        """When ``member`` inserted readings into this test's database, from the server log
        (the cluster serves the whole session: other tests' members have the same names)."""
        times = []
        for line in self.server.log_lines():
            parts = line.split("@", 3)
            if len(parts) == 4 and parts[1] == f"gpu-health-evaluator/{member}" and \
                    parts[2] == self.database and "INSERT INTO gpu_health_samples" in parts[3]:
                times.append(datetime.strptime(parts[0], "%Y-%m-%d %H:%M:%S.%f %Z")
                             .replace(tzinfo=UTC))
        return times


@pytest.fixture
def rig(tmp_path: Path, postgres: PostgresServer) -> Iterator[Rig]:
    database = postgres.new_database()
    postgres.sql(f"ALTER DATABASE {database} SET log_statement = 'mod'")
    (tmp_path / "pg-password").write_text(PASSWORD + "\n")
    (tmp_path / "vm").mkdir()
    with victoria_metrics(tmp_path / "vm", "-search.latencyOffset=1s") as vm:
        vm_import(vm, _series(datetime.now(UTC)))
        rig = Rig(tmp_path, postgres, database, vm)
        try:
            yield rig
        finally:
            rig.procs.stop_all()


def test_a_leader_killed_mid_cycle_leaves_no_gap_and_no_double_write(rig: Rig) -> None:
    rig.start("e1")
    rig.wait("e1 to lead", lambda: (rig.leader() or ("", 0))[0] == "e1" or None)
    rig.wait("e1 to write readings", lambda: rig.newest())
    rig.start("e2")
    rig.wait("e2 to be ready", lambda: http("GET", f"{rig.urls['e2']}/readyz")[0] == 200 or None)
    first = rig.newest()
    assert first is not None
    rig.wait("two more steps", lambda: rig.written_past(first, 2), 60)
    token = rig.leader()[1]  # type: ignore[index]
    with psycopg.connect(rig.server.url(rig.database)) as lock:
        lock.execute("LOCK TABLE gpu_health_samples IN ACCESS EXCLUSIVE MODE")
        # e1's next cycle waits for the table inside its fenced transaction (it holds the lease
        # row FOR SHARE): that is the middle of a cycle
        rig.wait("e1 in the middle of an ingest cycle", lambda: rig.sql(
            "SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
            "WHERE a.application_name = 'gpu-health-evaluator/e1' AND a.wait_event_type = "
            "'Lock' AND l.granted AND l.relation = 'gpu_health_leases'::regclass",
        )[0][0] or None, 60)
        os.kill(rig.pids["e1"], signal.SIGKILL)
        killed = datetime.now(UTC)
        lock.rollback()
    rig.procs.items = [p for p in rig.procs.items if p.name != "e1"]
    took = rig.wait("e2 to lead", lambda: (lambda lease: lease if lease and lease[0] == "e2"
                                           else None)(rig.leader()), 30)
    assert took[1] > token
    rig.wait("e2 to go on for four steps", lambda: rig.written_past(killed, 4), 90)
    doubles = rig.sql("SELECT node_id, gpu_index, sampled_at, count(*) FROM gpu_health_samples "
                      "GROUP BY 1, 2, 3 HAVING count(*) > 1")
    assert doubles == []
    steps = rig.sql("SELECT node_id, gpu_index, min(sampled_at), max(sampled_at), count(*) "
                    "FROM gpu_health_samples GROUP BY 1, 2 ORDER BY 1, 2")
    assert len(steps) == 2 * len(NODES)
    for node, gpu, low, high, count in steps:  # every step a change: every step written
        assert count == (high - low) // timedelta(seconds=STEP_S) + 1, (node, gpu, low, high)
    e2_writes = rig.sample_writes("e2")
    # it read nothing while it followed: its first reading came after it first led (after the
    # kill, unless a slow machine let the lease pass to it once before, which fencing allows)
    assert e2_writes and min(e2_writes) >= rig.first_led("e2")
    assert rig.sample_writes("e1")  # the log does show writes: the check can see them
