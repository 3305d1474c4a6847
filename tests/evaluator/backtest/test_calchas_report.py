"""The backtest report on the public Calchas data is the one the code gave before daily rollups.

``tests/fixtures/backtest-report-calchas-v2-ecc-xid-before-rollups.json`` was written by the
release before the daily rollups (``gpu-health-evaluator backtest --events <calchas> --preset
calchas --no-baselines``, the default rule set v2-ecc-xid), then stripped of what changes from
run to run: the time it was made, the file it went to, the replay's duration, the rule file's
path, and the events path. The storage layout changed under it (no ART index, sealed daily
rollups, window edges); every count, precision, recall, lift and fault list must still be the
same. Shadow versions changed the report's form once: the notes' wording ("26 matured first_fault
predictions (gate 20)"), the Wilson intervals, ``costs`` and ``gpu_hours_saved`` were added; the
stored copy was written again after a field-by-field check that nothing else moved. The
comparison beyond chance added each class's ``caught`` fault list (empty here: v2-ecc-xid
caught none of the 39 first faults); written again the same way. The capped busiest hours
added ``cap_busiest_hours`` (0) to the version's ``params``; the only key that moved. A
backtest file's feature statement went from 96 to 48 evaluation times (its memory limit):
``replay.evaluated_ticks``, the ticks whose features were read, went from 2782 to 2248 (fewer
read ahead and then passed over); nothing else moved. The weak layer added ``weak_gate``
(``none``) and ``weak_slowdown_minutes`` (60) to the version's ``params``; the only keys that
moved. The PCIe replay signal added ``weak_pcie_replays`` (0); the only key that moved. The
NVLink error signal added ``weak_nvlink_errors`` (0); the only key that moved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpu_health.evaluator.main import main
from tests.shared import require_shared

FIXTURES = Path(__file__).parents[2] / "fixtures"

STORED = FIXTURES / "backtest-report-calchas-v2-ecc-xid-before-rollups.json"
VOLATILE = ("generated_at", "database", "seconds", "origin")


def normalise(value: Any, events: str) -> Any:
    if isinstance(value, dict):
        return {k: normalise(v, events) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalise(v, events) for v in value]
    if isinstance(value, str):
        return value.replace(events, "<events>")
    return value


def test_report_is_identical_to_the_stored_copy(tmp_path: Path) -> None:
    events = require_shared("datasets/calchas") / "hbm-errors.csv"
    output = tmp_path / "report.json"
    code = main(["backtest", "--events", str(events), "--preset", "calchas", "--no-baselines",
                 "--no-progress", "--db", str(tmp_path / "bt.duckdb"), "--output", str(output)])
    assert code == 0
    got = normalise(json.loads(output.read_text(encoding="utf-8")), str(events))
    assert got == json.loads(STORED.read_text(encoding="utf-8"))
