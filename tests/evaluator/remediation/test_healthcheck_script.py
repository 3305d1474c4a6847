"""deploy/slurm/gpu-health-healthcheck, the HealthCheckProgram recipe of docs/slurm.md, run as
Slurm would run it (a process, as root) against a real Slurm and a real evaluator API."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gpu_health.evaluator.config.rules import load_action_policy
from gpu_health.evaluator.model import Sample
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.api_support import NOW, add_node, add_samples, make_ctx, sample, serve
from tests.slurm_support import SlurmCluster, slurm_cluster_fixture

SCRIPT = Path(__file__).resolve().parents[3] / "deploy" / "slurm" / "gpu-health-healthcheck"
def card(node: str, at: datetime, *, pending: int = 0, failure: int = 0) -> Sample:
    """One card with row-remap state (policy v2 judges it) and a corrected count."""
    return sample(node, 0, at, ecc_corrected_total=1, remapped_rows_pending=pending,
                  remapped_rows_failure=failure)


@pytest.fixture
def slurm() -> Iterator[SlurmCluster]:
    yield from slurm_cluster_fixture()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = DuckDBDatabase(tmp_path / "api.duckdb")
    recent = NOW - timedelta(minutes=2)
    for node in ("gh-n1", "gh-n2", "gh-n3"):
        add_node(database, node, None)
    add_samples(database, [
        card("gh-n1", recent, pending=1),  # reset_gpu
        card("gh-n2", recent),
        card("gh-n3", recent, failure=1),  # replace_candidate
    ])
    yield database
    database.close()


async def run_script(slurm: SlurmCluster, url: str, node: str) -> int:
    env = {**slurm.env, "GPU_HEALTH_EVALUATOR": url, "GPU_HEALTH_NODE": node,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{slurm.env['PATH']}"}
    proc = await asyncio.create_subprocess_exec(str(SCRIPT), env=env)
    return await asyncio.wait_for(proc.wait(), timeout=60)


async def test_critical_drains_ours_only_and_unknown_never_drains(
        db: Database, slurm: SlurmCluster) -> None:
    slurm.drain("gh-n3", "admin: fan broken")
    ctx = replace(make_ctx(db), action_policy=load_action_policy())
    async with serve(ctx) as client:
        url = str(client.make_url(""))
        assert [await run_script(slurm, url, n) for n in ("gh-n1", "gh-n2", "gh-n3")] == [0] * 3
    states = slurm.states()
    assert states["gh-n1"][0] == "drained"
    assert states["gh-n1"][1].startswith("gpu-health check: GPU 0: reset_gpu: a row remap is")
    assert states["gh-n2"][0] == "idle"
    assert states["gh-n3"] == ("drained", "admin: fan broken")  # someone else's drain stays
    # the evaluator gone: UNKNOWN, logged, no drain
    assert await run_script(slurm, url, "gh-n2") == 0
    assert slurm.states()["gh-n2"][0] == "idle"
