"""The high-availability scenario: three evaluator processes on one real PostgreSQL,
a fleet of stand-in exporters (one HTTP port per node, our exposition format, scrape times
recorded per node), and a real Alertmanager.

Evaluator i is member ``e<i>``; its sessions carry ``application_name`` ``gpu-health-
evaluator/e<i>``, and the test database logs every modifying statement with that name
(``log_statement = 'mod'``), so the test can tell which evaluator wrote what, and when.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store.engines.postgres import PostgresDatabase
from gpu_health.evaluator.store.readings.samples import insert_samples
from tests.e2e.chain import CORRECTED_END, REPO, binary, console_script, seeded_corrected
from tests.e2e.stack import Procs, ThreadedServer, free_port, http, wait_for
from tests.evaluator.ingest_support import Card, a100, render
from tests.postgres import PASSWORD, PostgresServer

NODES = 12
DEGRADING = ("ha-00", "ha-05", "ha-09")  # their card 0 jumps once the cluster is up
TTL_S = 3.0
SCRAPE_S = 4.0
MEMBERS = ("e1", "e2", "e3")


class Fleet(ThreadedServer):
    """Stand-in exporters: node ``ha-NN`` on its own port, two cards each."""

    def __init__(self) -> None:
        self.ports = {f"ha-{i:02d}": free_port() for i in range(NODES)}
        self.corrected = dict.fromkeys(self.ports, CORRECTED_END)
        self.uncorrected = dict.fromkeys(self.ports, 0)
        self.scrapes: dict[str, list[float]] = {node: [] for node in self.ports}
        self._lock = threading.Lock()
        sites = []
        for node, port in self.ports.items():
            app = web.Application()
            app.router.add_get("/metrics", self._handler(node))
            sites.append((app, port))
        super().__init__("stand-in fleet", sites)

    @staticmethod
    def uuid(node: str, gpu: int) -> str:
        return f"GPU-{node}-{gpu}"

    def _handler(self, node: str) -> Any:
        async def metrics(_request: web.Request) -> web.Response:
            with self._lock:
                self.scrapes[node].append(time.monotonic())
                corrected, uncorrected = self.corrected[node], self.uncorrected[node]
            cards = [Card(0, self.uuid(node, 0), a100(corrected, uncorrected)),
                     Card(1, self.uuid(node, 1), a100(7, 0))]
            return web.Response(text=render(cards), content_type="text/plain")
        return metrics

    def jump(self, node: str, by: int) -> None:
        with self._lock:
            self.corrected[node] += by

    def fault(self, node: str) -> None:
        """An uncorrectable error on the node's card 0 (its prediction becomes a hit)."""
        with self._lock:
            self.uncorrected[node] += 1

    def scrape_times(self) -> dict[str, list[float]]:
        with self._lock:
            return {node: list(times) for node, times in self.scrapes.items()}


@dataclass
class HaCluster:
    procs: Procs
    folder: Path
    fleet: Fleet
    server: PostgresServer
    database: str
    urls: dict[str, str]  # member -> evaluator base URL
    alertmanager: str
    pids: dict[str, int] = field(default_factory=dict)

    def db(self) -> PostgresDatabase:
        return PostgresDatabase(self.server.url(self.database), application_name="e2e-observer")

    def leader(self) -> tuple[str, int] | None:
        """(holder, token) of an unexpired lease, from the database."""
        db = self.db()
        try:
            row = db.fetchone("SELECT holder, token FROM gpu_health_leases "
                              "WHERE name = 'leader' AND expires_at > now()")
        finally:
            db.close()
        return None if row is None else (str(row[0]), int(row[1]))

    @contextlib.contextmanager
    def tick_held(self, member: str) -> Iterator[None]:
        """Hold ``member`` in the middle of a worker tick: this session locks the predictions
        table (ACCESS EXCLUSIVE) until the block ends, and the block begins once a session of
        ``member`` waits for that lock (inside its fenced transaction)."""
        import psycopg

        with psycopg.connect(self.server.url(self.database)) as con:
            con.execute("LOCK TABLE gpu_health_predictions IN ACCESS EXCLUSIVE MODE")
            name = f"gpu-health-evaluator/{member}"
            # Only a session inside a fenced transaction counts: it holds the lease row FOR
            # SHARE (a RowShareLock on the leases table). Another of the member's sessions can
            # wait for the predictions table too (a read of the page or of /metrics), and
            # stopping the member then would leave no transaction for the server to end.
            with psycopg.connect(self.server.url(self.database), autocommit=True) as watch:
                self.wait(f"{member} to wait for the predictions table in a fenced tick",
                          lambda: watch.execute(
                              "SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l "
                              "ON l.pid = a.pid WHERE a.application_name = %s "
                              "AND a.wait_event_type = 'Lock' AND l.granted "
                              "AND l.relation = 'gpu_health_leases'::regclass "
                              "AND l.mode = 'RowShareLock'",
                              [name]).fetchone()[0], 30)  # type: ignore[index]
            yield
            con.rollback()

    def signal(self, member: str, sig: signal.Signals) -> None:
        os.kill(self.pids[member], sig)

    def am_alerts(self) -> list[dict[str, Any]]:
        status, body = http("GET", f"{self.alertmanager}/api/v2/alerts"
                                   "?filter=alertname%3D%22GPU_FAULT_PREDICTED%22")
        assert status == 200, (status, body)
        return list(body)

    def log_entries(self) -> list[tuple[datetime, str, str]]:
        """The server log as (time, application, text) entries; a statement's further lines
        (they carry no prefix) belong to the entry before them."""
        entries: list[tuple[datetime, str, str]] = []
        for line in self.server.log_lines():
            parts = line.split("@", 3)
            try:
                at = datetime.strptime(parts[0], "%Y-%m-%d %H:%M:%S.%f %Z").replace(tzinfo=UTC)
            except ValueError:
                if entries:
                    at, app, text = entries[-1]
                    entries[-1] = (at, app, f"{text} {line.strip()}")
                continue
            entries.append((at, parts[1], parts[3] if len(parts) > 3 else ""))
        return entries

    def writes_by(self, member: str, tables: tuple[str, ...],
                  after: datetime) -> list[str]:
        """Modifying statements of ``member`` on ``tables`` logged after ``after`` (UTC):
        "LOG:  statement: ..." (simple protocol) or "LOG:  execute <unnamed>: ..."."""
        return [text for at, app, text in self.log_entries()
                if app == f"gpu-health-evaluator/{member}" and at > after
                and ("statement: " in text or "execute " in text)
                and any(t in " ".join(text.split()) for t in tables)]

    def wait(self, what: str, probe: Any, deadline_s: float = 60.0) -> Any:
        return wait_for(what, probe, deadline_s, self.procs)


def _seed(url: str, end: datetime) -> None:
    """Eight days of slowly rising correctable counts for the degrading nodes' card 0 (the
    chain test's curve): the live jump then predicts on the first tick that sees it."""
    rows = []
    for node in DEGRADING:
        for k in range(8 * 48 + 1):
            hours = k / 2
            rows.append(Sample(CardKey(node, 0, "real"), Fleet.uuid(node, 0),
                               end - timedelta(hours=hours),
                               Counters(ecc_uncorrected_total=0,
                                        ecc_corrected_total=seeded_corrected(hours),
                                        retired_pages=None, remapped_rows_pending=0,
                                        remapped_rows_failure=0)))
    db = PostgresDatabase(url)
    try:
        insert_samples(db, rows)
    finally:
        db.close()


def _config(folder: Path, member: str, port: int, fleet: Fleet, url: str, am: str) -> Path:
    path = folder / f"{member}.yml"
    path.write_text(yaml.safe_dump({
        "scrape": {"interval": f"{SCRAPE_S:g}s", "timeout": "2s"},
        "static_configs": [{"targets": [f"127.0.0.1:{p}"], "labels": {"node": n, "tenant": "e2e"}}
                           for n, p in fleet.ports.items()],
        "storage": {"url": url, "password_file": "pg-password", "connect_timeout": "5s"},
        "ha": {"lease_ttl": f"{TTL_S:g}s", "member_id": member},
        "web": {"listen_address": f"127.0.0.1:{port}",
                "external_url": f"http://127.0.0.1:{port}"},
        "alerting": {"alertmanagers": [am], "resend_interval": "2s", "timeout": "1s"},
        "rules": {"dir": str(REPO / "rules"), "active": "v1-ecc-growth"},
    }))
    return path


def start_ha(folder: Path, server: PostgresServer) -> Iterator[HaCluster]:
    database = server.new_database()
    server.sql(f"ALTER DATABASE {database} SET log_statement = 'mod'")
    am_port = free_port()
    procs, fleet = Procs(folder), Fleet()
    urls = {m: f"http://127.0.0.1:{free_port()}" for m in MEMBERS}
    cluster = HaCluster(procs, folder, fleet, server, database, urls,
                        f"http://127.0.0.1:{am_port}")
    try:
        fleet.start()
        (folder / "pg-password").write_text(PASSWORD + "\n")
        (folder / "alertmanager.yml").write_text(yaml.safe_dump({
            "route": {"receiver": "null", "group_by": ["alertname", "node"],
                      "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "null"}]}))
        procs.start("alertmanager", [
            binary("prometheus-alertmanager"), f"--config.file={folder / 'alertmanager.yml'}",
            f"--storage.path={folder / 'am-data'}", "--cluster.listen-address=",
            f"--web.listen-address=127.0.0.1:{am_port}"])
        _seed(server.url(database), datetime.now(UTC) - timedelta(minutes=1))
        url = server.url(database, password=False)
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "GPU_HEALTH_RULE_SCAN_INTERVAL_MINUTES": "0.05"}  # a worker tick every 3 s
        for member, base in urls.items():
            config = _config(folder, member, int(base.rsplit(":", 1)[1]), fleet, url,
                             cluster.alertmanager)
            proc = procs.start(member, [console_script("gpu-health-evaluator"), "run",
                                        f"--config={config}"], env=env, cwd=folder)
            cluster.pids[member] = proc.popen.pid
        cluster.wait("Alertmanager to be ready",
                     lambda: http("GET", f"{cluster.alertmanager}/-/ready")[0] == 200)
        for member, base in urls.items():
            cluster.wait(f"{member} to be ready",
                         lambda b=base: http("GET", f"{b}/readyz")[0] == 200)
        yield cluster
    finally:
        for member in MEMBERS:  # a stopped process would ignore SIGTERM
            if member in cluster.pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(cluster.pids[member], signal.SIGCONT)
        procs.stop_all()
        fleet.stop()

