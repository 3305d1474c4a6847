"""Rendezvous hashing of scrape targets over live members: every target has exactly
one owner, members agree without talking, and a member leaving moves only its own targets."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from gpu_health.evaluator.cluster.assign import TargetShare, mine, owner


@dataclass(frozen=True)
class T:
    url: str
    node_id: str


members_st = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6, unique=True)
targets_st = st.lists(st.integers(0, 10_000), max_size=60, unique=True).map(
    lambda ns: [T(f"http://gpu-{n}:10346/metrics", f"gpu-{n}") for n in ns])


@given(members_st, targets_st)
def test_every_target_has_exactly_one_owner(members: list[str], targets: list[T]) -> None:
    shares = [mine(targets, members, m) for m in members]
    assert sorted(t.url for share in shares for t in share) == sorted(t.url for t in targets)


@given(members_st, targets_st, st.data())
def test_a_leaving_member_moves_only_its_own_targets(members: list[str], targets: list[T],
                                                      data: st.DataObject) -> None:
    gone = data.draw(st.sampled_from(members))
    rest = [m for m in members if m != gone]
    for t in targets:
        before = owner(t.url, members)
        if before != gone and rest:
            assert owner(t.url, rest) == before


def test_shares_are_balanced_enough() -> None:
    targets = [T(f"http://gpu-{n}:10346/metrics", f"gpu-{n}") for n in range(2000)]
    sizes = [len(mine(targets, ["a", "b", "c"], m)) for m in ("a", "b", "c")]
    assert sum(sizes) == 2000 and min(sizes) > 550  # 667 each on average


def test_a_member_that_has_not_seen_itself_still_takes_its_share() -> None:
    targets = [T(f"u{n}", f"n{n}") for n in range(50)]
    assert len(mine(targets, [], "a")) == 50  # alone: everything
    assert mine(targets, ["b"], "a") == mine(targets, ["a", "b"], "a")


def test_gained_targets_report_their_nodes_once() -> None:
    members = ["a", "b"]
    gained: list[set[str]] = []
    share = TargetShare(lambda: members, "a", gained.append)
    targets = [T(f"u{n}", f"n{n}") for n in range(40)]
    first = share(targets)
    assert gained == []  # the first share is not a hand-over
    members.remove("b")
    assert len(share(targets)) == 40
    assert gained == [{t.node_id for t in targets} - {t.node_id for t in first}]
    share(targets)
    assert len(gained) == 1
