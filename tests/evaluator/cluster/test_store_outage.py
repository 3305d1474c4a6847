"""An evaluator on PostgreSQL when the database goes away and comes back: cycles fail
and are counted by reason, /readyz says 503 with why, the leader gives its leadership up once
its lease may have expired, and everything resumes when the database is back. At start-up, an
unreachable database is exit code 1 naming the host."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from gpu_health.evaluator.compose import Service, build_service
from gpu_health.evaluator.config.file import Config, parse_config
from gpu_health.evaluator.main import main
from tests.evaluator.http.test_process_endpoints import _serve
from tests.evaluator.ingest_support import Card, FakeClock, StandIn, a100, render, stand_in
from tests.postgres import PASSWORD, PostgresServer, postgres_server


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    with postgres_server() as server:  # its own cluster: the test stops and starts it
        yield server


@pytest.fixture
async def exporter() -> AsyncIterator[StandIn]:
    async with stand_in() as s:
        s.bodies["gpu-01"] = render([Card(i, f"GPU-{i}", a100(i)) for i in range(2)])
        yield s


def _config(tmp_path: Path, server: PostgresServer, exporter: StandIn) -> Config:
    (tmp_path / "pw").write_text(PASSWORD)
    return parse_config({
        "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"],
                            "labels": {"node": "gpu-01",
                                       "__metrics_path__": "/t/gpu-01/metrics"}}],
        "storage": {"url": server.url(server.new_database(), password=False),
                    "password_file": "pw", "connect_timeout": "2s"},
        "ha": {"lease_ttl": "3s", "member_id": "solo"},
        "web": {"listen_address": "127.0.0.1:0"},
    }, base=tmp_path)


async def _ready(http: aiohttp.ClientSession, base: str) -> tuple[int, dict[str, Any]]:
    async with http.get(base + "/readyz") as r:
        return r.status, await r.json()


def _errors(service: Service, loop: str) -> float:
    value = service.app.registry.get_sample_value(
        "gpu_health_evaluator_loop_errors_total", {"loop": loop, "reason": "unavailable"})
    return value or 0.0


async def test_database_lost_and_back(tmp_path: Path, own_server: PostgresServer,
                                      exporter: StandIn) -> None:
    service = build_service(_config(tmp_path, own_server, exporter), {}, clock=FakeClock(),
                            start_loops=False)
    runner, base = await _serve(service.app)
    try:
        async with aiohttp.ClientSession() as http:
            await service.app.run_tick("cluster")
            await service.app.run_tick("ingest")
            status, body = await _ready(http, base)
            assert status == 200 and body["leader"].startswith("leader solo")
            assert service.app.registry.get_sample_value("gpu_health_evaluator_leader") == 1
            own_server.stop("fast")
            exporter.bodies["gpu-01"] = render([Card(i, f"GPU-{i}", a100(i + 1)) for i in range(2)])
            for loop in ("cluster", "ingest", "worker"):
                await service.app.run_tick(loop)  # each fails, is counted, and returns
            assert _errors(service, "cluster") >= 1 and _errors(service, "ingest") >= 1
            status, body = await _ready(http, base)
            assert status == 503 and "cannot reach the store" in body["not_ready"]["cluster"]
            own_server.start()
            for _ in range(3):  # the pool replaces its broken connections
                await service.app.run_tick("cluster")
            await service.app.run_tick("ingest")
            status, body = await _ready(http, base)
            assert status == 200 and body["ready"] is True
            rows = await service.db.run(service.db.fetchone,
                                        "SELECT count(*) FROM gpu_health_samples")
            assert rows[0] == 4  # the change missed during the outage is written now
    finally:
        await runner.cleanup()


def test_an_unreachable_database_at_start_is_exit_1_naming_the_host(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "evaluator.yml"
    config.write_text(yaml.safe_dump({
        "storage": {"url": f"postgresql://gpuhealth@127.0.0.1:{port}/gpuhealth",
                    "connect_timeout": "1s"},
        "web": {"listen_address": "127.0.0.1:0"}}))
    assert main(["run", f"--config={config}"], environ={}) == 1
    err = capsys.readouterr().err
    assert f"cannot connect to PostgreSQL at 127.0.0.1:{port}/gpuhealth" in err
