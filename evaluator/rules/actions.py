"""Recommended actions per card from a versioned policy file (``rules/actions/*.yaml``). Pure.

The policy lists branches in order (first match wins), each naming one condition of
:data:`CONDITIONS`, the action, the document it follows and a short text. A card's
:class:`CardState` holds what the conditions read: the latest known row-remap state, the
driver's recovery action and pending page retirement, and the memory Xids logged within the
policy's window. A policy judges only cards that carry at least one of the state fields its
branches read (Xids aside: no Xid is not evidence of health); for any other card the action is
``unknown`` (we do not know), never ``none`` (nothing to do). docs/actions.md has the table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpu_health.contract import RECOVERY_ACTIONS
from gpu_health.errors import ConfigError
from gpu_health.evaluator.model import CardSlot
from gpu_health.evaluator.rules.ruleset import yaml_mapping

ACTIONS: Final = ("replace_candidate", "reboot_node", "reset_gpu", "restart_workload", "none",
                  "unknown")
CHOSEN: Final = ACTIONS[:4]  # what a branch may recommend
UNKNOWN: Final = "unknown"
NONE: Final = "none"


@dataclass(frozen=True, slots=True)
class CardState:
    """What the policy reads for one card (``None``: unknown)."""

    remap_pending: int | None = None
    remap_failure: int | None = None
    banks_none: int | None = None
    recent_xids: frozenset[int] = frozenset()
    recovery_action: str | None = None  # one of gpu_health.contract.RECOVERY_ACTIONS
    pages_pending: int | None = None

    @property
    def remap_known(self) -> bool:
        return self.remap_pending is not None or self.remap_failure is not None

    def knows(self, field: str) -> bool:
        """Whether the state field a condition reads (:data:`READS`) is known."""
        if field == "remap":
            return self.remap_known
        return getattr(self, field) is not None


def _positive(value: int | None) -> bool:
    return value is not None and value > 0


def _xid(code: int) -> Callable[[CardState], bool]:
    def logged(state: CardState) -> bool:
        return code in state.recent_xids

    return logged


def _recovery(action: str) -> Callable[[CardState], bool]:
    def current(state: CardState) -> bool:
        return state.recovery_action == action

    return current


CONDITIONS: Final[dict[str, Callable[[CardState], bool]]] = {
    "remap_failure": lambda s: _positive(s.remap_failure),
    "banks_exhausted": lambda s: _positive(s.banks_none),
    "remap_pending": lambda s: _positive(s.remap_pending),
    **{f"xid_{code}": _xid(code) for code in (48, 63, 64, 94, 95)},
    **{f"recovery_{a}": _recovery(a) for a in RECOVERY_ACTIONS if a != "none"},
    "pages_pending": lambda s: _positive(s.pages_pending),
}
# The state field each condition reads; a policy judges a card that knows one of its fields.
READS: Final[dict[str, str | None]] = {
    **dict.fromkeys(("remap_failure", "banks_exhausted", "remap_pending"), "remap"),
    **{c: "recovery_action" for c in CONDITIONS if c.startswith("recovery_")},
    "pages_pending": "pages_pending",
    **{c: None for c in CONDITIONS if c.startswith("xid_")},  # no Xid is not evidence
}


@dataclass(frozen=True, slots=True)
class Branch:
    when: str
    action: str
    source: str
    text: str


@dataclass(frozen=True, slots=True)
class ActionPolicy:
    version: str
    sources: Mapping[str, str]
    xid_window_hours: int
    branches: tuple[Branch, ...]


@dataclass(frozen=True, slots=True)
class Recommendation:
    action: str
    reason: str
    policy: str


# The latest recommendation per card slot (node, gpu index), as the /metrics snapshot computed
# it: what the alert loop annotates and the remediation loop drains by.
CardActions = Callable[[], Mapping[CardSlot, Recommendation]]


def recommend(state: CardState, policy: ActionPolicy) -> Recommendation:
    """The first matching branch's action; ``none`` when the inputs are known and nothing
    matched; ``unknown`` when the card carries none of the policy's row-remap fields."""
    fields = {READS[b.when] for b in policy.branches} - {None}
    if not any(state.knows(str(f)) for f in fields):
        return Recommendation(UNKNOWN, f"the card reports none of {_names(fields)}: this "
                              "policy cannot judge it", policy.version)
    for branch in policy.branches:
        if CONDITIONS[branch.when](state):
            return Recommendation(branch.action, branch.text, policy.version)
    return Recommendation(NONE, f"nothing to do from what the card reports ({_names(fields)}) "
                          "and no memory Xid in the window", policy.version)


_FIELD_NAMES: Final = {"remap": "row-remap state", "recovery_action": "recovery action",
                       "pages_pending": "pending page retirement"}


def _names(fields: set[str | None]) -> str:
    return ", ".join(_FIELD_NAMES[f] for f in sorted(f for f in fields if f is not None))


def parse_policy(text: str, origin: str) -> ActionPolicy:
    """Validate a policy file; ConfigError lists every problem."""
    raw = yaml_mapping(text, origin)
    problems: list[str] = []
    raw_sources = raw.get("sources")
    sources: dict[str, Any] = raw_sources if isinstance(raw_sources, dict) else {}
    if not sources:
        problems.append(f"{origin}: sources must name the documents the policy follows")
    window = raw.get("xid_window_hours")
    if not isinstance(window, int) or isinstance(window, bool) or not 1 <= window <= 24 * 90:
        problems.append(f"{origin}: xid_window_hours must be 1..2160")
        window = 0
    branches = [_branch(item, i, sources, origin, problems)
                for i, item in enumerate(raw.get("rules") or [])]
    if not branches:
        problems.append(f"{origin}: rules must list at least one branch")
    version = raw.get("version")
    if not isinstance(version, str) or not version:
        problems.append(f"{origin}: version is required")
    if problems:
        raise ConfigError(problems)
    return ActionPolicy(str(version), {str(k): str(v) for k, v in sources.items()},
                        int(window), tuple(b for b in branches if b is not None))


def _branch(item: Any, i: int, sources: Mapping[str, Any], origin: str,
            problems: list[str]) -> Branch | None:
    where = f"{origin}: rules[{i}]"
    if not isinstance(item, dict):
        problems.append(f"{where}: expected a mapping")
        return None
    found = len(problems)
    if item.get("when") not in CONDITIONS:
        problems.append(f"{where}: when must be one of {', '.join(CONDITIONS)}")
    if item.get("action") not in CHOSEN:
        problems.append(f"{where}: action must be one of {', '.join(CHOSEN)}")
    if item.get("source") not in sources:
        problems.append(f"{where}: source must name an entry of sources")
    if not isinstance(item.get("text"), str) or not item["text"].strip():
        problems.append(f"{where}: text is required")
    if len(problems) > found:
        return None
    return Branch(str(item["when"]), str(item["action"]), str(item["source"]),
                  str(item["text"]).strip())
