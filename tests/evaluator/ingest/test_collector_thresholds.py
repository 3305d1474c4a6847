"""The evaluator's ``run`` and ``demo`` set the collector thresholds for their process; the
setting is CPython's own, read back as set."""

from __future__ import annotations

import gc
import inspect

from gpu_health.evaluator import main
from gpu_health.evaluator.ingest import collector_thresholds


def test_apply_sets_the_thresholds_and_returns_the_old_ones() -> None:
    before = gc.get_threshold()
    try:
        assert collector_thresholds.apply() == before
        assert gc.get_threshold() == collector_thresholds.THRESHOLDS
    finally:
        gc.set_threshold(*before)


def test_the_long_running_commands_apply_them() -> None:
    for command in (main.cmd_run, main.cmd_demo):
        assert "collector_thresholds.apply()" in inspect.getsource(command)
