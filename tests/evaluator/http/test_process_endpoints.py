"""The evaluator process: /metrics (promtool-clean), /healthz, /readyz, /targets, loops, CLI."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gpu_health.errors import StoreError
from gpu_health.evaluator.app import EvaluatorApp
from gpu_health.evaluator.compose import Service, build_service
from gpu_health.evaluator.config.file import Config, parse_config
from gpu_health.evaluator.main import main
from tests.evaluator.ingest_support import Card, FakeClock, StandIn, a100, render, stand_in
from tests.shared import REPO


def _config(tmp_path: Path, server: StandIn, **extra: Any) -> Config:
    raw: dict[str, Any] = {
        "static_configs": [{"targets": [f"127.0.0.1:{server.port}"],
                            "labels": {"node": "gpu-01", "tenant": "acme",
                                       "__metrics_path__": "/t/gpu-01/metrics"}}],
        "storage": {"path": "ev.duckdb"},
        "web": {"listen_address": "127.0.0.1:0"},
    }
    raw.update(extra)
    return parse_config(raw, base=tmp_path)


def _service(config: Config, *, start_loops: bool = False) -> Service:
    return build_service(config, {}, clock=FakeClock(), start_loops=start_loops)


async def _serve(ev: EvaluatorApp) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(ev.web_app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@pytest.fixture
async def server() -> AsyncIterator[StandIn]:
    async with stand_in() as s:
        s.bodies["gpu-01"] = render([Card(i, f"GPU-{i}", a100(i)) for i in range(4)])
        yield s


async def test_endpoints_after_one_cycle(server: StandIn, tmp_path: Path) -> None:
    service = _service(_config(tmp_path, server))
    runner, base = await _serve(service.app)
    try:
        assert service.pipeline is not None
        report = await service.pipeline.run_cycle()
        assert report.rows_written == 4
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/readyz") as r:
                assert r.status == 200 and (await r.json())["ready"] is True
            async with http.get(base + "/healthz") as r:
                assert r.status == 200
            async with http.get(base + "/targets") as r:
                row = (await r.json())["targets"][0]
                assert (row["node"], row["tenant"], row["up"], row["cards"]) == (
                    "gpu-01", "acme", True, 4)
            async with http.get(base + "/metrics") as r:
                text = await r.text()
            for path in ("/metrics", "/healthz", "/targets", "/api/v1/openapi.json"):
                async with http.head(base + path) as r:  # HEAD wherever GET is served
                    assert r.status == 200 and await r.read() == b"", path
        assert "\nprocess_cpu_seconds_total " in text and "\npython_info{" in text
        for line in (
            'gpu_health_evaluator_rows_written_total{source="real"} 4.0',
            'gpu_health_evaluator_write_decisions_total{reason="first"} 4.0',
            "gpu_health_evaluator_dedup_cache_misses_total 4.0",
            "gpu_health_evaluator_dedup_cache_entries 4.0",
            "gpu_health_evaluator_targets 1.0",
            'gpu_health_evaluator_cleanup_runs_total{result="ok"} 0.0',
        ):
            assert line in text, line
        assert "gpu_health_evaluator_db_statements_total" in text
        check = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                               capture_output=True, check=False)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        await runner.cleanup()


async def test_not_ready_until_every_discovery_source_answered(server: StandIn,
                                                               tmp_path: Path) -> None:
    cfg = _config(tmp_path, server, http_sd_configs=[{"url": "http://127.0.0.1:1/sd"}])
    service = _service(cfg)
    service.app.add_ready_check("extra", lambda: None)
    runner, base = await _serve(service.app)
    try:
        async with aiohttp.ClientSession() as http, http.get(base + "/readyz") as r:
            body = await r.json()
        assert r.status == 503 and set(body["not_ready"]) == {"discovery"}
        assert service.discovery is not None
        assert service.discovery.last_errors  # the failed http_sd is recorded with its reason
    finally:
        await runner.cleanup()


async def test_loops_catch_count_and_go_on_and_healthz_sees_a_stuck_loop(
    server: StandIn, tmp_path: Path
) -> None:
    ev = _service(_config(tmp_path, server), start_loops=True).app
    ticks: list[int] = []
    done = asyncio.Event()

    async def flaky() -> None:
        ticks.append(1)
        if len(ticks) == 1:
            raise StoreError("db went away", reason="query")
        if len(ticks) == 2:
            raise RuntimeError("bug")
        done.set()

    started = asyncio.Event()

    async def background() -> None:
        started.set()
        await asyncio.Event().wait()

    ev.add_loop("flaky", 0.01, flaky)
    ev.add_background("bg", background)
    runner, base = await _serve(ev)
    try:
        await asyncio.wait_for(done.wait(), 10)
        await asyncio.wait_for(started.wait(), 10)
        assert ev.metrics.loop_errors.labels("flaky", "query")._value.get() == 1
        assert ev.metrics.loop_errors.labels("flaky", "internal")._value.get() == 1
        ev.loop_ticks["ingest"] = asyncio.get_running_loop().time() - 10_000
        async with aiohttp.ClientSession() as http, http.get(base + "/healthz") as r:
            assert r.status == 503 and "ingest loop" in (await r.json())["problem"]
    finally:
        await runner.cleanup()


def test_bad_config_exits_2_listing_every_problem(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yml"
    path.write_text("scrape: {interval: never}\nweb: {listen_address: x}\n")
    assert main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s)" in err and "scrape.interval" in err and "web.listen_address" in err


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except OSError:
        return 0


def test_cli_run_serves_and_stops_on_sigterm_and_a_locked_db_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = tmp_path / "ev.yml"
    cfg.write_text(f"web: {{listen_address: '127.0.0.1:{port}'}}\nstorage: {{path: ev.duckdb}}\n"
                   "static_configs: [{targets: ['127.0.0.1:1']}]\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_health.evaluator.main",
         "--config", str(cfg)], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while _get(f"http://127.0.0.1:{port}/readyz") != 200:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)  # waiting for another process to start, not for time to pass
        other = tmp_path / "other.yml"  # another port, the same database file
        other.write_text(cfg.read_text().replace(f"127.0.0.1:{port}", "127.0.0.1:0"))
        assert main(["run", "--config", str(other)]) == 1  # the same file, already locked
        assert "cannot open" in capsys.readouterr().err
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr


async def test_readyz_fails_once_ingest_cycles_cannot_write_and_recovers(
        server: StandIn, tmp_path: Path) -> None:
    """Before: a revoked samples table left /readyz 200 while 8 cycles failed."""
    service = _service(_config(tmp_path, server))
    runner, base = await _serve(service.app)
    try:
        assert service.pipeline is not None
        await service.pipeline.run_cycle()
        await service.db.run(service.db.execute,
                             "ALTER TABLE gpu_health_samples RENAME TO samples_gone")
        server.bodies["gpu-01"] = render([Card(i, f"GPU-{i}", a100(9 + i))
                                          for i in range(4)])  # a change: rows to write
        async with aiohttp.ClientSession() as http:
            for cycle in range(3):
                with pytest.raises(StoreError):
                    await service.pipeline.run_cycle()
                async with http.get(base + "/readyz") as r:
                    body = await r.json()
                assert (r.status == 503) == (cycle == 2), body  # one failure is a blip
            assert body["not_ready"]["ingest"] == (
                "the last 3 ingest cycles could not write to the store (query)")
            await service.db.run(service.db.execute,
                                 "ALTER TABLE samples_gone RENAME TO gpu_health_samples")
            await service.pipeline.run_cycle()
            async with http.get(base + "/readyz") as r:
                assert r.status == 200
    finally:
        await runner.cleanup()


def test_a_full_disk_is_not_called_a_write_conflict() -> None:
    import duckdb

    from gpu_health.evaluator.store.engines.duckdb import _reason

    assert _reason(duckdb.TransactionException(
        "TransactionContext Error: Failed to commit: could not write file: No space left on "
        "device")) == "resources"
    assert _reason(duckdb.TransactionException("Conflict on update")) == "conflict"
    assert _reason(duckdb.CatalogException("Table does not exist")) == "query"
