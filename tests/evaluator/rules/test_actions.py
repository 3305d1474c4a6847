"""The recommended-action policy (rules/actions/nvidia-memory-v1.yaml): every branch, its
order, unknown versus none, and the facts of real nvidia-smi captures."""

from __future__ import annotations

import csv
import re
from datetime import timedelta
from pathlib import Path

import pytest

from evaluator.config.rules import DEFAULT_ACTION_POLICY, load_action_policy
from evaluator.model import CardKey, Counters, RemapDetails, Sample, XidKey, XidSample
from evaluator.rules.actions import CONDITIONS, Branch, CardState, parse_policy, recommend
from evaluator.store.actions import card_states
from evaluator.store.samples import insert_samples
from evaluator.store.xid_samples import insert_xid_samples
from gpu_health.errors import ConfigError
from tests.conftest import NewDb
from tests.evaluator.ingest_support import T0
from tests.shared import require_shared

POLICY = load_action_policy()
QUIET = CardState(remap_pending=0, remap_failure=0, banks_none=0)

# a state that meets exactly one condition
TRIGGER = {
    "remap_failure": CardState(0, 1, 0), "banks_exhausted": CardState(0, 0, 2),
    "remap_pending": CardState(1, 0, 0),
    **{f"xid_{x}": CardState(0, 0, 0, frozenset({x})) for x in (48, 63, 64, 94, 95)},
}


def test_the_shipped_policy_names_its_sources_and_covers_every_condition() -> None:
    assert POLICY.version == DEFAULT_ACTION_POLICY.stem == "nvidia-memory-v1"
    assert {"remap", "xid"} <= set(POLICY.sources)
    assert all("https://docs.nvidia.com/" in text for text in POLICY.sources.values())
    assert {b.when for b in POLICY.branches} == set(CONDITIONS)


@pytest.mark.parametrize("branch", POLICY.branches, ids=lambda b: b.when)
def test_every_branch(branch: Branch) -> None:
    rec = recommend(TRIGGER[branch.when], POLICY)
    assert (rec.action, rec.reason, rec.policy) == (branch.action, branch.text, POLICY.version)


def test_first_match_wins_the_most_severe_first() -> None:
    both = CardState(remap_pending=1, remap_failure=1, banks_none=0, recent_xids=frozenset({94}))
    assert recommend(both, POLICY).action == "replace_candidate"
    assert recommend(CardState(1, 0, 0, frozenset({94})), POLICY).action == "reset_gpu"


def test_unknown_is_not_none() -> None:
    assert recommend(QUIET, POLICY).action == "none"
    # no row-remap field known (another vendor, or a pre-Ampere driver): the policy cannot judge
    assert recommend(CardState(), POLICY).action == "unknown"
    assert recommend(CardState(recent_xids=frozenset({48})), POLICY).action == "unknown"


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
    assert recommend(state, POLICY).action == "reset_gpu"


@pytest.mark.parametrize("name", ["query-h100-590.48.01-full.csv",
                                  "query-h200-590.48.01-full.csv"])
def test_the_healthy_h100_and_h200_captures_need_nothing(name: str) -> None:
    rows = list(csv.reader((require_shared() / "nvidia" / name).read_text().splitlines()))
    cells = {h.strip(): v.strip() for h, v in zip(rows[0], rows[1], strict=True)}
    flag = {"Yes": 1, "No": 0}
    state = CardState(flag[cells["remapped_rows.pending"]], flag[cells["remapped_rows.failure"]],
                      int(cells["remapped_rows.histogram.none"]))
    assert recommend(state, POLICY).action == "none"


def test_the_store_gives_the_latest_remap_state_and_recent_memory_xids(new_db: NewDb) -> None:
    db = new_db("a")
    key = CardKey("n1", 0)
    insert_samples(db, [
        Sample(key, "GPU-a", T0, Counters(0, 3, None, 0, 0), RemapDetails(remap_banks_none=0)),
        Sample(key, "GPU-a", T0 + timedelta(hours=1), Counters(1, 3, None, 1, 0),
               RemapDetails(remap_banks_none=0)),
        Sample(CardKey("n2", 0), None, T0, Counters(0, 3)),  # no row-remap fields
    ])
    insert_xid_samples(db, [XidSample(XidKey("n1", 0, "real", 94), "GPU-a", T0, 0),
                            XidSample(XidKey("n1", 0, "real", 94), "GPU-a",
                                      T0 + timedelta(minutes=30), 1)])
    states = card_states(db, now=T0 + timedelta(hours=2), source="real",
                         xid_window=timedelta(hours=168))
    assert states[("n1", 0, "GPU-a")] == CardState(1, 0, 0, frozenset({94}))
    assert recommend(states[("n1", 0, "GPU-a")], POLICY).action == "reset_gpu"
    assert recommend(states[("n2", 0, None)], POLICY).action == "unknown"
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
    from evaluator.compose import build_service
    from evaluator.config.file import parse_config

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
    (rules / "actions" / "nvidia-memory-v1.yaml").write_text("version: nvidia-memory-v1\n")
    with pytest.raises(ConfigError, match="sources must name"):
        build_service(config, {}, start_loops=False)
