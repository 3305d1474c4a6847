"""The recommended-action policies (rules/actions/nvidia-memory-v1.yaml and -v2.yaml, the
default): every branch, the order, unknown versus none, the recovery action and pending page
retirement read back from the store, and the facts of real nvidia-smi captures."""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.contract import RECOVERY_ACTIONS
from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.rules import DEFAULT_ACTION_POLICY, load_action_policy
from gpu_health.evaluator.model import CardDetails, CardKey, Counters, Sample, XidKey, XidSample
from gpu_health.evaluator.rules.actions import (
    CHOSEN,
    CONDITIONS,
    READS,
    ActionPolicy,
    Branch,
    CardState,
    parse_policy,
    recommend,
)
from gpu_health.evaluator.store.predictions.actions import card_states
from gpu_health.evaluator.store.readings.samples import insert_samples
from gpu_health.evaluator.store.readings.xid_samples import insert_xid_samples
from tests.conftest import NewDb
from tests.evaluator.ingest_support import T0
from tests.shared import require_shared

POLICY = load_action_policy()
V1 = load_action_policy(DEFAULT_ACTION_POLICY.with_name("nvidia-memory-v1.yaml"))
QUIET = CardState(remap_pending=0, remap_failure=0, banks_none=0, recovery_action="none",
                  pages_pending=0)

# a state that meets exactly one condition
TRIGGER = {
    "remap_failure": replace(QUIET, remap_failure=1),
    "banks_exhausted": replace(QUIET, banks_none=2),
    "remap_pending": replace(QUIET, remap_pending=1),
    **{f"xid_{x}": replace(QUIET, recent_xids=frozenset({x})) for x in (48, 63, 64, 94, 95)},
    **{f"recovery_{a}": replace(QUIET, recovery_action=a) for a in RECOVERY_ACTIONS[1:]},
    "pages_pending": replace(QUIET, pages_pending=1),
}


def test_the_shipped_policies_name_their_sources_and_v2_covers_every_condition() -> None:
    assert POLICY.version == DEFAULT_ACTION_POLICY.stem == "nvidia-memory-v2"
    assert {"remap", "xid", "recovery", "pages"} <= set(POLICY.sources)
    for policy in (POLICY, V1):
        assert all("https://docs.nvidia.com/" in text for text in policy.sources.values())
    assert {b.when for b in POLICY.branches} == set(CONDITIONS) == set(TRIGGER) == set(READS)
    # v2 keeps every branch of v1, in the same relative order
    v1_order = [b.when for b in V1.branches]
    assert [b.when for b in POLICY.branches if b.when in v1_order] == v1_order
    assert {b.action for b in POLICY.branches} == set(CHOSEN)


@pytest.mark.parametrize("policy,branch", [(p, b) for p in (POLICY, V1) for b in p.branches],
                         ids=lambda x: getattr(x, "when", getattr(x, "version", "")))
def test_every_branch(policy: ActionPolicy, branch: Branch) -> None:
    rec = recommend(TRIGGER[branch.when], policy)
    assert (rec.action, rec.reason, rec.policy) == (branch.action, branch.text, policy.version)


def test_first_match_wins_the_most_severe_first() -> None:
    both = replace(QUIET, remap_pending=1, remap_failure=1, recent_xids=frozenset({94}))
    assert recommend(both, POLICY).action == "replace_candidate"
    assert recommend(replace(QUIET, remap_pending=1, recent_xids=frozenset({94})),
                     POLICY).action == "reset_gpu"
    # the driver's own statement outranks the Xid inference and a pending remap
    reboot = replace(QUIET, remap_pending=1, recovery_action="node_reboot",
                     recent_xids=frozenset({48}))
    assert recommend(reboot, POLICY).action == "reboot_node"
    assert recommend(reboot, V1).action == "reset_gpu"  # v1 does not read the recovery action


def test_unknown_is_not_none() -> None:
    assert recommend(QUIET, POLICY).action == "none"
    # no state field known (another vendor, or an old driver): the policy cannot judge
    assert recommend(CardState(), POLICY).action == "unknown"
    assert recommend(CardState(recent_xids=frozenset({48})), POLICY).action == "unknown"


def test_v2_judges_a_card_with_a_recovery_action_but_no_row_remap_state() -> None:
    """A Volta card (remapped_rows.* read N/A) that reports a recovery action and pending
    retirement: v2 judges it, v1 (row-remap state only) cannot."""
    volta = CardState(recovery_action="none", pages_pending=0)
    assert recommend(volta, POLICY).action == "none"
    assert "recovery action" in recommend(volta, POLICY).reason
    assert recommend(volta, V1).action == "unknown"
    assert recommend(replace(volta, pages_pending=1), POLICY).action == "reboot_node"
    assert recommend(CardState(recovery_action="gpu_reset"), POLICY).action == "reset_gpu"


def _q_report_state(text: str) -> CardState:
    """The facts of an ``nvidia-smi -q`` report's "Remapped Rows" section."""
    section = text[text.index("Remapped Rows"):]

    def field(name: str) -> str:
        match = re.search(rf"^\s*{name}\s*:\s*(.+?)\s*$", section, re.MULTILINE)
        assert match, name
        return match.group(1)

    flag = {"Yes": 1, "No": 0}
    none = int(field("None").split()[0])
    return CardState(flag[field("Pending")], flag[field("Remapping Failure Occurred")], none)


def test_the_a10_capture_with_a_pending_remap_is_reset_to_apply() -> None:
    text = (require_shared() / "nvidia" / "q-a10-535.129.03-remap-pending.txt").read_text()
    state = _q_report_state(text)
    assert state == CardState(remap_pending=1, remap_failure=0, banks_none=0)
    assert recommend(state, POLICY).action == recommend(state, V1).action == "reset_gpu"


@pytest.mark.parametrize("name", ["query-h100-590.48.01-full.csv",
                                  "query-h200-590.48.01-full.csv"])
def test_the_healthy_h100_and_h200_captures_need_nothing(name: str) -> None:
    rows = list(csv.reader((require_shared() / "nvidia" / name).read_text().splitlines()))
    cells = {h.strip(): v.strip() for h, v in zip(rows[0], rows[1], strict=True)}
    flag = {"Yes": 1, "No": 0}
    state = CardState(flag[cells["remapped_rows.pending"]], flag[cells["remapped_rows.failure"]],
                      int(cells["remapped_rows.histogram.none"]))
    assert recommend(state, V1).action == "none"
    if "gpu_recovery_action" in cells:  # the drivers that list it (590 on the H200)
        state = replace(state, recovery_action=cells["gpu_recovery_action"].lower())
    assert recommend(state, POLICY).action == "none"


def test_the_store_gives_the_latest_remap_state_and_recent_memory_xids(new_db: NewDb) -> None:
    db = new_db("a")
    key = CardKey("n1", 0)
    insert_samples(db, [
        Sample(key, "GPU-a", T0, Counters(0, 3, None, 0, 0), CardDetails(remap_banks_none=0)),
        Sample(key, "GPU-a", T0 + timedelta(hours=1), Counters(1, 3, None, 1, 0),
               CardDetails(remap_banks_none=0)),
        Sample(CardKey("n2", 0), None, T0, Counters(0, 3)),  # no row-remap fields
        Sample(CardKey("n3", 0), "GPU-v", T0, Counters(0, 3),  # a Volta: recovery, no remap
               CardDetails(recovery_action=2, retired_pages_pending=1)),
        Sample(CardKey("n4", 0), "GPU-x", T0, Counters(0, 3),  # an NVML value from the future
               CardDetails(recovery_action=7)),
    ])
    insert_xid_samples(db, [XidSample(XidKey("n1", 0, "real", 94), "GPU-a", T0, 0),
                            XidSample(XidKey("n1", 0, "real", 94), "GPU-a",
                                      T0 + timedelta(minutes=30), 1)])
    states = card_states(db, now=T0 + timedelta(hours=2), source="real",
                         xid_window=timedelta(hours=168))
    assert states[("n1", 0, "GPU-a")] == CardState(1, 0, 0, frozenset({94}))
    assert recommend(states[("n1", 0, "GPU-a")], POLICY).action == "reset_gpu"
    assert recommend(states[("n2", 0, None)], POLICY).action == "unknown"
    assert states[("n3", 0, "GPU-v")] == CardState(recovery_action="node_reboot", pages_pending=1)
    assert recommend(states[("n3", 0, "GPU-v")], POLICY).action == "reboot_node"
    assert states[("n4", 0, "GPU-x")].recovery_action is None  # not known here: unknown
    later = card_states(db, now=T0 + timedelta(days=8), source="real",
                        xid_window=timedelta(hours=1))
    assert later == {}  # nothing sampled within the last week: no state, the action is unknown
    db.close()


def test_a_broken_policy_lists_every_problem() -> None:
    text = "version: x\nsources: {}\nxid_window_hours: 0\nrules:\n  - when: nope\n    action: fix\n"
    with pytest.raises(ConfigError) as caught:
        parse_policy(text, "p.yaml")
    problems = " ".join(caught.value.problems)
    for needle in ("sources must name", "xid_window_hours", "when must be one of",
                   "action must be one of", "text is required"):
        assert needle in problems


def test_the_policy_is_read_from_rules_dir_and_a_broken_one_stops_start_up(
        tmp_path: Path) -> None:
    from gpu_health.evaluator.compose import build_service
    from gpu_health.evaluator.config.file import parse_config

    rules = tmp_path / "rules"
    (rules / "actions").mkdir(parents=True)
    for name in ("v2-ecc-xid.yaml",):
        (rules / name).write_text((DEFAULT_ACTION_POLICY.parents[1] / name).read_text())
    config = parse_config({"storage": {"path": "a.duckdb"}, "rules": {"dir": "rules"}},
                          base=tmp_path)
    # no actions/ file under rules.dir: the policy beside the package is used
    service = build_service(config, {}, start_loops=False)
    assert service.prediction_state.policy is not None
    service.db.close()
    (rules / "actions" / "nvidia-memory-v2.yaml").write_text("version: nvidia-memory-v2\n")
    with pytest.raises(ConfigError, match="sources must name"):
        build_service(config, {}, start_loops=False)
