"""``gpu-health-evaluator calibrate`` end to end on a fleet with a planted precursor.

The fleet (:mod:`tests.evaluator.calibrate_support`): two-week correctable-error ramps before
most faults, noisy cards with bursts, sudden faults, quiet cards; 80 cards x 90 days read every
hour. A small search (min_increase x consecutive_windows) around v1 with its statistics gate
lowered to 5 matured predictions (``v1-small``: a fleet this small makes fewer than v1's 20).
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_health.evaluator.compose import build_service
from gpu_health.evaluator.config.file import load_config
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.main import main
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.backtest_support import V1_FILE
from tests.evaluator.calibrate_support import START, write_fleet

SEARCH = ["--search", "min_increase=8,32", "--search", "consecutive_windows=1,3"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fleet")
    text = V1_FILE.read_text().replace("version: v1-ecc-growth", "version: v1-small")
    (folder / "v1-small.yaml").write_text(
        re.sub(r"stats_min_matured: *20", "stats_min_matured: 5", text))
    write_fleet(folder / "fleet.duckdb", 80, 90, step=timedelta(hours=1))
    return folder / "fleet.duckdb"


def calibrate(tmp_path: Path, fleet: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    tmp_path.mkdir(exist_ok=True)
    db = tmp_path / "cal.duckdb"
    db.write_bytes(fleet.read_bytes())  # each run on its own copy of the history
    out = tmp_path / "report.json"
    code = main(["calibrate", "--db", str(db), "--rules", str(fleet.parent / "v1-small.yaml"),
                 *SEARCH, "--output", str(out), "--log.level", "warn", *extra])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_finds_confirms_and_writes_a_better_version(tmp_path: Path, fleet: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, report = calibrate(tmp_path, fleet, "--min-test-faults", "8",
                             "--write-rule", str(tmp_path / "rules"))
    assert code == 0
    text = capsys.readouterr().out
    assert text.startswith("VERDICT better: on the test part: v1-small+")
    assert report["verdict"]["status"] == "better"
    chosen, base = report["chosen"], report["base"]
    assert chosen["changes"]["min_increase"] == [32, 8]
    test = chosen["test"]["first_fault"]
    assert test["recall"] > 0.5 and test["precision"] >= 0.2
    low, high = test["recall_ci95"]
    assert low < test["recall"] < high
    assert base["test"]["first_fault"]["predicted_faulty_cards"] < test["predicted_faulty_cards"]
    # recall credits faults held by a window opened in the train part: counted and said
    assert 0 <= test["credited_from_other_part"] <= test["predicted_faulty_cards"]
    assert chosen["train"]["first_fault"]["credited_from_other_part"] == 0  # nothing before it
    assert "of them held by a window opened in the other part" in text
    assert {b["version"] for b in report["baselines"]} == {"baseline-new-correctable",
                                                            "baseline-repeat"}
    assert len(report["candidates"]) == 4 and report["search"]["default"] is False
    assert report["split"]["test"]["first_faults"] >= 8
    # the written rule: a new version with every parameter, loadable as it is
    path = Path(report["rule_file"])
    assert path.parent == tmp_path / "rules"
    written = load_ruleset(path, env={})
    assert path.stem == written.version == f"v1-small-cal-{written.params_hash[:6]}"
    assert written.params.min_increase == 8 and written.params.window_days == 7
    assert "# Test (not tuned on): first-fault precision" in path.read_text()
    # ... and it runs live: active, or as a shadow beside v1
    for rules in (f"{{dir: {path.parent}, active: {written.version}}}",
                  f"{{active: v1-ecc-growth, shadow: [{path}]}}"):
        config = tmp_path / "evaluator.yml"
        config.write_text(f"storage:\n  path: {tmp_path / 'live.duckdb'}\nrules: {rules}\n")
        service = build_service(load_config(config, {}), {}, start_loops=False)
        versions = [service.worker.ruleset.version,
                    *(s.version for s in service.worker.shadows)]
        assert written.version in versions
        service.db.close()


def test_a_test_part_with_too_few_faults_writes_nothing(tmp_path: Path, fleet: Path) -> None:
    code, report = calibrate(tmp_path, fleet, "--write-rule", str(tmp_path / "rules"))
    assert code == 0
    assert report["verdict"]["status"] == "insufficient"
    assert "fewer than the 20 needed" in report["verdict"]["reason"]
    assert report["rule_file"] is None and not (tmp_path / "rules").exists()
    assert report["chosen"] is not None  # the search still says what it found


def test_the_choice_never_sees_the_test_part(tmp_path: Path, fleet: Path) -> None:
    """The same history twice, except that in the second one every card fails one hour after
    the split. Every train number and the choice are the same; the test part differs."""
    period = ["--since", START.isoformat(), "--until", (START + timedelta(days=90)).isoformat()]
    _, plain = calibrate(tmp_path / "a", fleet, *period)
    changed = tmp_path / "b"
    changed.mkdir()
    copy = changed / "fleet.duckdb"
    copy.write_bytes(fleet.read_bytes())
    split = plain["split"]["test"]["since"]
    db = DuckDBDatabase(copy)
    db.execute(
        """INSERT INTO gpu_health_samples (node_id, gpu_index, gpu_uuid, source, sampled_at,
               ecc_uncorrected_total, ecc_corrected_total)
           SELECT node_id, gpu_index, gpu_uuid, source,
                  CAST($split AS TIMESTAMP) + INTERVAL 1 HOUR,
                  arg_max(ecc_uncorrected_total, sampled_at) + 1,
                  arg_max(ecc_corrected_total, sampled_at)
           FROM gpu_health_samples WHERE sampled_at <= CAST($split AS TIMESTAMP)
           GROUP BY node_id, gpu_index, gpu_uuid, source""",
        {"split": split.replace("T", " ").removesuffix("Z")})
    db.close()
    (changed / "v1-small.yaml").write_text((fleet.parent / "v1-small.yaml").read_text())
    _, hostile = calibrate(changed, copy, *period)
    assert hostile["split"] == plain["split"] | {"test": hostile["split"]["test"]}
    assert hostile["split"]["test"]["first_faults"] > plain["split"]["test"]["first_faults"]
    assert [c["train"] for c in hostile["candidates"]] == [c["train"] for c in
                                                           plain["candidates"]]
    assert hostile["chosen"]["version"] == plain["chosen"]["version"]
    assert hostile["chosen"]["train"] == plain["chosen"]["train"]
    assert hostile["chosen"]["test"] != plain["chosen"]["test"]


def test_bad_arguments_are_listed_together(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["calibrate", "--db", str(tmp_path / "x.duckdb"), "--train-fraction", "1.5",
                 "--min-precision", "2", "--objective", "cost", "--search", "bogus=1",
                 "--cost-failure", "10", "--rules", str(tmp_path / "missing.yaml")])
    assert code == 2
    err = capsys.readouterr().err
    for needle in ("--train-fraction must be strictly between 0 and 1",
                   "--min-precision must be within 0..1", "'bogus' is not a rule parameter",
                   "--cost-failure needs --cost-mitigation too",
                   "--objective cost needs --cost-failure and --cost-mitigation",
                   "--rules: no rule file"):
        assert needle in err
    assert not (tmp_path / "x.duckdb").exists()


def test_the_cost_objective_takes_the_most_gpu_hours_saved(tmp_path: Path,
                                                           fleet: Path) -> None:
    code, report = calibrate(tmp_path, fleet, "--objective", "cost", "--min-test-faults", "8",
                             "--cost-failure", "512", "--cost-mitigation", "8",
                             "--mitigation-time", "1h")
    assert code == 0
    assert report["costs"] == {"cost_failure_gpu_hours": 512.0,
                               "cost_mitigation_gpu_hours": 8.0,
                               "mitigation_time_seconds": 3600.0}
    saved = {c["version"]: c["train"]["gpu_hours_saved"] for c in report["candidates"]}
    assert report["chosen"]["train"]["gpu_hours_saved"] == max(saved.values())
    for part in ("train", "test"):
        m = report["chosen"][part]
        assert m["gpu_hours_saved"] == m["first_fault"]["gpu_hours_saved"] + \
            m["repeat"]["gpu_hours_saved"]
    assert report["objective"]["kind"] == "cost"


def test_bad_places_to_write_and_too_many_candidates_are_refused_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--write-rule`` naming a file gave a traceback after the whole search (14 s); 10,000
    candidates were refused only because their 5-hex version names happened to collide."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    many = ["--search", "min_increase=" + ",".join(str(4 + i) for i in range(17)),
            "--search", "ratio=" + ",".join(f"1.{i:02d}" for i in range(1, 18))]
    code = main(["calibrate", "--db", str(tmp_path / "x.duckdb"), "--write-rule", str(blocker),
                 "--output", str(blocker / "report.json"), *many])
    assert code == 2
    err = capsys.readouterr().err
    for needle in (f"--write-rule: {blocker} is not a folder",
                   f"--output: {blocker} is not a folder",
                   "289 combinations; at most 256"):
        assert needle in err
    assert "Traceback" not in err and not (tmp_path / "x.duckdb").exists()
