"""The drain policy without Slurm: the sinfo parser on real output of Slurm 22.05.8, each
safety rule, and the config that switches it on (every problem listed at once)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.config.remediation import NodeNaming, SlurmRemediation
from gpu_health.evaluator.remediation.policy import AlertRow, decide
from gpu_health.evaluator.remediation.slurm import drain_reason, parse_sinfo

# Lines in the format of `sinfo -h -N -o '%N|%T|%P|%E'` (Slurm 22.05.8, Debian 12: the real
# command's output is parsed in test_slurm_drain.py), written for the cases: a node drained by
# an operator, one not responding, one in two partitions, a reason holding a "|".
SINFO = """gh-n1|idle|gpu*|none
gh-n2|drained|gpu*|admin: fan broken
gh-n3|idle*|gpu*|none
gh-n4|mixed|gpu*|none
gh-n4|mixed|debug|none
gh-n5|draining|gpu*|gpu-health: v2-ecc-xid gpu1 reset_gpu | see alert
"""
LIVE = SlurmRemediation(enabled=True, dry_run=False, max_drained_nodes=10,
                        max_drained_fraction=1.0)
CLUSTER = parse_sinfo(SINFO)


def alert(node: str, gpus: tuple[int, ...] = (0,), closed_by: str | None = None) -> AlertRow:
    return AlertRow(f"a-{node}", node, gpus, "v2-ecc-xid", closed_by)


def one(node: str, action: str = "reset_gpu", config: SlurmRemediation = LIVE) -> str:
    [step] = decide([alert(node)], [], {(node, 0): action}, CLUSTER, config, {})
    return step.result


def test_sinfo_is_read_per_node_with_partitions_and_free_text_reasons() -> None:
    assert CLUSTER.nodes["gh-n4"].partitions == {"gpu", "debug"}
    assert CLUSTER.nodes["gh-n1"].reason is None
    assert CLUSTER.nodes["gh-n5"].reason == "gpu-health: v2-ecc-xid gpu1 reset_gpu | see alert"
    assert CLUSTER.ours() == {"gh-n5"}
    assert not CLUSTER.nodes["gh-n3"].schedulable  # not responding


@given(st.text(max_size=300))
def test_the_parser_never_raises(text: str) -> None:
    parse_sinfo(text)


@pytest.mark.parametrize("node,action,result", [
    ("gh-n1", "reset_gpu", "go"),
    ("gh-n4", "replace_candidate", "go"),
    ("gh-n1", "restart_workload", "skipped_action"),
    ("gh-n1", "unknown", "skipped_action"),
    ("gh-n2", "reset_gpu", "refused_foreign"),   # drained by an operator
    ("gh-n3", "reset_gpu", "refused_foreign"),   # not responding
    ("gh-n5", "reset_gpu", "already_ours"),
    ("gh-n9", "reset_gpu", "unknown_node"),
])
def test_each_rule(node: str, action: str, result: str) -> None:
    assert one(node, action) == result


def test_dry_run_decides_the_same_and_runs_nothing() -> None:
    assert one("gh-n1", config=replace(LIVE, dry_run=True)) == "dry_run"


def test_the_caps_count_our_drains_including_this_ticks() -> None:
    capped = replace(LIVE, max_drained_nodes=2)  # gh-n5 is ours already
    steps = decide([alert("gh-n1"), alert("gh-n4")], [],
                   {("gh-n1", 0): "reset_gpu", ("gh-n4", 0): "reset_gpu"}, CLUSTER, capped, {})
    assert [s.result for s in steps] == ["go", "refused_cap"]
    # five nodes in gpu, fraction 0.4: two at most, and gh-n5 is one of them
    fraction = replace(LIVE, max_drained_fraction=0.4)
    steps = decide([alert("gh-n1"), alert("gh-n4")], [],
                   {("gh-n1", 0): "reset_gpu", ("gh-n4", 0): "reset_gpu"}, CLUSTER, fraction, {})
    assert [s.result for s in steps] == ["go", "refused_cap"]


def test_any_card_of_the_node_with_an_action_in_the_set_counts() -> None:
    [step] = decide([alert("gh-n1", (0, 3))], [],
                    {("gh-n1", 0): "none", ("gh-n1", 3): "replace_candidate"}, CLUSTER, LIVE, {})
    assert (step.result, step.gpu, step.reason) == (
        "go", 3, "gpu-health: v2-ecc-xid gpu3 replace_candidate")


def test_final_results_are_not_decided_again() -> None:
    done = {("a-gh-n1", "drain"): "done", ("a-gh-n4", "drain"): "refused_cap"}
    steps = decide([alert("gh-n1"), alert("gh-n4")], [],
                   {("gh-n1", 0): "reset_gpu", ("gh-n4", 0): "reset_gpu"}, CLUSTER, LIVE, done)
    assert [(s.node_id, s.result) for s in steps] == [("gh-n4", "go")]  # a cap is retried


@pytest.mark.parametrize("node,closed_by,result", [
    ("gh-n5", "oncall", "go"),
    ("gh-n5", "system", "kept"),           # node removed from the targets: not an operator
    ("gh-n2", "oncall", "refused_foreign"),  # someone else's reason now
    ("gh-n1", "oncall", "not_drained"),
])
def test_resume_rules(node: str, closed_by: str, result: str) -> None:
    [step] = decide([], [alert(node, closed_by=closed_by)], {}, CLUSTER, LIVE, {})
    assert (step.action, step.result) == ("resume", result)


def test_reasons_are_bounded_and_marked_ours() -> None:
    reason = drain_reason("v" * 300, 1, "reset_gpu")
    assert reason.startswith("gpu-health: ") and len(reason) == 120


def test_node_naming() -> None:
    naming = NodeNaming(r"([^.]+)\.cluster\.example", r"\1")
    assert naming.slurm_name("gh-n1.cluster.example") == "gh-n1"
    assert naming.slurm_name("other") is None
    assert NodeNaming().slurm_name("gh-n1") == "gh-n1"


def test_the_config_is_off_and_dry_by_default_and_lists_every_problem(tmp_path: Path) -> None:
    default = parse_config({}, base=tmp_path).remediation
    assert (default.enabled, default.dry_run, default.actions) == (
        False, True, ("replace_candidate", "reset_gpu"))
    raw = {"remediation": {"slurm": {
        "enabled": "yes", "actions": ["reboot_now"], "max_drained_fraction": 2,
        "node_name": {"regex": "(", "replacement": r"\1"}, "bogus": 1}}}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, base=tmp_path)
    text = " ".join(caught.value.problems)
    for needle in ("remediation.slurm.enabled", "'reboot_now' is not one of",
                   "max_drained_fraction", "remediation.slurm.node_name", "bogus"):
        assert needle in text, needle
    good = parse_config({"remediation": {"slurm": {
        "enabled": True, "dry_run": False, "node_name": {"regex": r"(\w+)\..*"}}}},
        base=tmp_path).remediation
    assert good.naming.slurm_name("n1.example") == "n1" and not good.dry_run


def test_the_label_naming_reads_the_target_label_and_never_guesses(tmp_path: Path) -> None:
    config = parse_config({"remediation": {"slurm": {"node_name": "label"}}, "static_configs": [
        {"targets": ["10.0.0.7:10346"], "labels": {"node": "rack1-gpu7", "slurm_node": "n7"}}]},
        base=tmp_path)
    assert config.remediation.naming.label
    assert config.static_configs[0].labels == (("node", "rack1-gpu7"), ("slurm_node", "n7"))
    naming = config.remediation.naming
    assert naming.slurm_name("rack1-gpu7", "n7") == "n7"
    assert naming.slurm_name("rack1-gpu7", None) is None


def test_the_evaluator_runs_the_loop_only_when_enabled(tmp_path: Path) -> None:
    from gpu_health.evaluator.compose import build_service

    base = {"storage": {"path": "a.duckdb"}, "static_configs": [
        {"targets": ["127.0.0.1:9"], "labels": {"node": "n1", "slurm_node": "gh-n1"}}]}
    for enabled in (False, True):
        raw = {**base, "remediation": {"slurm": {"enabled": enabled, "node_name": "label",
                                                 "interval": "45s"}}}
        service = build_service(parse_config(raw, base=tmp_path), {}, start_loops=False)
        try:
            loop = service.app.loops.get("remediation")
            assert (loop is not None) == enabled
            if loop is not None:
                assert loop.interval == 45.0
        finally:
            service.db.close()


def test_a_node_an_open_alert_holds_is_not_resumed() -> None:
    """The resolved alert's resume and the new alert's drain are decided together."""
    resolved = alert("gh-n5", closed_by="oncall")
    new = AlertRow("a-gh-n5-new", "gh-n5", (0,), "v2-ecc-xid")
    steps = decide([new], [resolved], {("gh-n5", 0): "reset_gpu"}, CLUSTER, LIVE, {})
    assert [(s.alert_id, s.action, s.result) for s in steps] == [
        ("a-gh-n5-new", "drain", "already_ours"), ("a-gh-n5", "resume", "kept")]
    # an open alert whose drain was done in an earlier tick holds the node as well
    held = decide([new], [resolved], {}, CLUSTER, LIVE, {("a-gh-n5-new", "drain"): "done"})
    assert [(s.action, s.result) for s in held] == [("resume", "kept")]
    # an open alert that needs no drain (its action is outside the set) holds nothing
    free = decide([new], [resolved], {("gh-n5", 0): "restart_workload"}, CLUSTER, LIVE, {})
    assert [(s.action, s.result) for s in free] == [("drain", "skipped_action"),
                                                     ("resume", "go")]


def test_a_node_drained_again_after_our_resume_is_repaired_unless_held() -> None:
    from gpu_health.evaluator.remediation.policy import LastStep

    resumed = {"gh-n5": LastStep("a-old", "gh-n5", "resume", "done")}
    [step] = decide([], [], {}, CLUSTER, LIVE, {}, resumed)
    assert (step.alert_id, step.action, step.result, step.repair) == (
        "a-old", "resume", "go", True)
    new = AlertRow("a-new", "gh-n5", (0,), "v2-ecc-xid")
    held = decide([new], [], {("gh-n5", 0): "reset_gpu"}, CLUSTER, LIVE, {}, resumed)
    assert [(s.action, s.result) for s in held] == [("drain", "already_ours")]  # not undone
    drained = {"gh-n5": LastStep("a-old", "gh-n5", "drain", "done")}
    assert decide([], [], {}, CLUSTER, LIVE, {}, drained) == []  # our drain, not a late one
    assert decide([], [], {}, CLUSTER, replace(LIVE, dry_run=True), {}, resumed) == []
