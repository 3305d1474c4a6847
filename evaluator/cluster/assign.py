"""Which live member scrapes which target: rendezvous (highest-random-weight) hashing. Pure.

Each (member, target) pair gets a weight from a hash; the member with the highest weight owns
the target. When a member joins or leaves, only the targets it wins or held move, and every
member computes the same owner from the same member list without talking to the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Sequence
from typing import Protocol, TypeVar


class _Keyed(Protocol):
    @property
    def url(self) -> str: ...

    @property
    def node_id(self) -> str: ...


T = TypeVar("T", bound=_Keyed)


def weight(member: str, key: str) -> int:
    digest = hashlib.blake2b(f"{member}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(key: str, members: Collection[str]) -> str | None:
    """The member that owns ``key`` (None: no member)."""
    return max(members, key=lambda m: (weight(m, key), m), default=None)


def mine(targets: Sequence[T], members: Collection[str], me: str) -> list[T]:
    """This member's share of ``targets`` (by target URL). ``me`` always counts as a member: a
    member that has not yet seen its own heartbeat scrapes its share as if it had."""
    everyone = set(members) | {me}
    return [t for t in targets if owner(t.url, everyone) == me]


class TargetShare:
    """This member's targets, cycle by cycle. A target it gains (a member left, or it joined)
    reports its node to ``on_gain``: the dedup cache's rows of that node may be stale (another
    member wrote meanwhile), so they are read from the store again instead of trusted."""

    def __init__(self, members: Callable[[], Collection[str]], me: str,
                 on_gain: Callable[[set[str]], None]) -> None:
        self._members = members
        self._me = me
        self._on_gain = on_gain
        self._held: set[str] | None = None

    def __call__(self, targets: Sequence[T]) -> list[T]:
        share = mine(targets, self._members(), self._me)
        urls = {t.url for t in share}
        if self._held is not None:
            gained = {t.node_id for t in share if t.url not in self._held}
            if gained:
                self._on_gain(gained)
        self._held = urls
        return share
