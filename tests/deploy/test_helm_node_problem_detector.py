"""The chart's opt-in node-problem-detector custom plugin monitor: rendered by the real helm,
its JSON read as NPD reads it, and its rule run as NPD would run it (the path and args, with
``NODE_NAME`` set as NPD's DaemonSet sets it) against a real evaluator API on 127.0.0.1: the
exit code is NPD's status and the one line of stdout fits its ``max_output_length``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpu_health.evaluator.config.rules import load_action_policy
from gpu_health.evaluator.store import Database
from tests.deploy.chart_support import VALUE_SETS, by_kind, merged, one, refused, template
from tests.evaluator.api_support import make_ctx, serve
from tests.evaluator.test_check import db  # noqa: F401 - the fixture: nodes in each state

CLI = str(Path(sys.executable).parent / "gpu-health-evaluator")
NPD = {"nodeProblemDetector": {"enabled": True}}


def monitor(tmp_path: Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    docs = template(merged(VALUE_SETS["defaults"], NPD, extra or {}), tmp_path)
    doc = one(docs, "ConfigMap", "node-problem-detector")
    parsed: dict[str, Any] = json.loads(doc["data"]["gpu-health-monitor.json"])
    return parsed


def test_off_by_default(tmp_path: Path) -> None:
    docs = template(VALUE_SETS["defaults"], tmp_path)
    assert not [d for d in by_kind(docs, "ConfigMap")
                if "node-problem-detector" in d["metadata"]["name"]]


def test_the_monitor_is_a_custom_plugin_with_one_permanent_condition(tmp_path: Path) -> None:
    config = monitor(tmp_path)
    assert config["plugin"] == "custom" and config["source"] == "gpu-health"
    plugin = config["pluginConfig"]
    assert plugin["max_output_length"] == 80 and plugin["timeout"] == "20s"
    [condition] = config["conditions"]
    [rule] = config["rules"]
    assert rule["type"] == "permanent" and rule["condition"] == condition["type"]
    assert (condition["type"], condition["reason"], rule["reason"]) == (
        "GPUHealthProblem", "GPUHealthy", "GPUFaultPredicted")
    args = rule["args"]
    assert args[args.index("--timeout") + 1] == "15"  # 5 s under NPD's kill
    assert args[args.index("--evaluator") + 1] == "http://gh-gpu-health-evaluator.gpu-health.svc:10347"
    assert "--node" not in args  # $NODE_NAME, set per node by NPD's DaemonSet


def test_bad_values_are_refused(tmp_path: Path) -> None:
    for bad in ({"timeout": "90s"}, {"conditionType": "gpu health"}, {"maxOutputLength": 40},
                {"checkPath": "relative/cli"}):
        assert "nodeProblemDetector" in refused(merged(VALUE_SETS["defaults"], {
            "nodeProblemDetector": {"enabled": True, **bad}}), tmp_path), bad


@pytest.mark.parametrize("node,status,message", [
    ("ok-1", 0, "node ok-1: 1 cards"),  # the node is $NODE_NAME
    ("predicted-1", 1, "CRITICAL: GPU 0: fault predicted by v1-ecc-growth"),
    ("reset-1", 1, "CRITICAL: GPU 0: reset_gpu: a row remap is pending"),
    ("stalled-1", 2, "WARNING: GPU 0: collection stalled"),
    ("nobody", 2, "UNKNOWN: node nobody is not known to the evaluator")])
async def test_the_rule_runs_as_npd_would_run_it(db: Database, tmp_path: Path,  # noqa: F811
                                                 node: str, status: int, message: str) -> None:
    config = monitor(tmp_path, {"nodeProblemDetector": {"tokenFile": ""}})
    [rule] = config["rules"]
    ctx = replace(make_ctx(db), action_policy=load_action_policy())
    async with serve(ctx) as client:
        args = list(rule["args"])
        args[args.index("--evaluator") + 1] = str(client.make_url("")).rstrip("/")
        proc = await asyncio.create_subprocess_exec(
            CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "NODE_NAME": node})  # rule["path"] is the image's copy of CLI
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    text = out.decode()
    assert proc.returncode == status, text
    assert text.count("\n") == 1 and len(text.rstrip("\n")) <= config["pluginConfig"][
        "max_output_length"]
    assert text.startswith(message), text
