"""Which exporter series the evaluator reads, and the stored key each one fills (pure tables).

A counter or plain detail is one series per card (:data:`KEY_BY_NAME`); a state set is one
series per state, 1 for the current one (:data:`STATE_SETS`); the bank histogram and the clock
slowdown carry their key in a label (:func:`bank_key`, :func:`slowdown_key`). Contract series
the store does not keep are read and left out (:data:`WANTED_METRICS` holds them, so they are not
counted as unknown metrics).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from gpu_health.contract import (
    BANK_LEVELS,
    BANK_METRIC,
    FABRIC_OK_METRIC,
    FABRIC_STATE_METRIC,
    FABRIC_STATES,
    INFO_METRIC,
    LINK_KEYS,
    METRIC_NAMES,
    METRIC_PREFIX,
    NODE_METRIC,
    NVLINK_CARD_METRIC,
    NVLINK_ERRORS_METRIC,
    PAGES_PENDING_METRIC,
    PCIE_REPLAYS_METRIC,
    PCIE_ROLLOVERS_METRIC,
    RECOVERY_ACTIONS,
    RECOVERY_METRIC,
    REMAP_ROW_METRICS,
    SLOWDOWN_METRIC,
    SLOWDOWN_REASONS,
    STORED_SLOWDOWNS,
    SXID_METRIC,
    XID_METRIC,
)

XID_LABEL = "xid"
SELF_METRIC_PREFIX = METRIC_PREFIX + "exporter_"
RECOVERY_KEY = "recovery_action"
FABRIC_KEY = "fabric_state"
# state-set metric -> (its state label, its detail key, the states in their stored order)
STATE_SETS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    RECOVERY_METRIC: ("action", RECOVERY_KEY, RECOVERY_ACTIONS),
    FABRIC_STATE_METRIC: ("state", FABRIC_KEY, FABRIC_STATES),
}

KEY_BY_NAME: dict[str, str] = {name: key for key, name in METRIC_NAMES.items()}
KEY_BY_NAME.update({name: key for key, name in REMAP_ROW_METRICS.items()})
KEY_BY_NAME[PAGES_PENDING_METRIC] = "retired_pages_pending"
KEY_BY_NAME[FABRIC_OK_METRIC] = "fabric_status_success"
KEY_BY_NAME.update({METRIC_PREFIX + key: key for key in ("pcie_link_width",
                                                          "pcie_link_width_max")})
KEY_BY_NAME[PCIE_REPLAYS_METRIC] = "pcie_replays"
KEY_BY_NAME[NVLINK_CARD_METRIC] = "nvlink_errors"
# Contract series read and left out (docs/rules.md, *The weak layer*, says why the store does
# not keep them):
# known, so not counted as ``unknown_metric``.
_NOT_STORED: frozenset[str] = frozenset((*(METRIC_PREFIX + key for key in LINK_KEYS
                                           if METRIC_PREFIX + key not in KEY_BY_NAME),
                                         PCIE_ROLLOVERS_METRIC, NVLINK_ERRORS_METRIC))
# Each NVLink link's errors (up to 54 series a card; the store keeps the card's total) are read
# and left out above rather than skipped: a scrape compares the lines it reads with last time's
# and decodes them only when they changed, while a skipped line is validated every time (an
# 8-card NVLink node: 0.45 ms a scrape read, 2.1 ms skipped).
WANTED_METRICS: frozenset[str] = frozenset((*KEY_BY_NAME, INFO_METRIC, XID_METRIC, SXID_METRIC,
                                            BANK_METRIC, NODE_METRIC, SLOWDOWN_METRIC,
                                            *STATE_SETS, *_NOT_STORED))


def bank_key(labels: Mapping[str, str], ignored: Counter[str]) -> str | None:
    """The detail key of a bank-histogram sample, or None (counted) without a known level."""
    level = labels.get("level", "")
    if level not in BANK_LEVELS:
        ignored["bad_level_label"] += 1
        return None
    return "remap_banks_" + level


def slowdown_key(labels: Mapping[str, str], ignored: Counter[str]) -> str | None:
    """The detail key of a slowdown sample; None for a reason the store leaves out, or (counted)
    an unknown one."""
    reason = labels.get("reason", "")
    if reason not in SLOWDOWN_REASONS:
        ignored["bad_reason_label"] += 1
    return STORED_SLOWDOWNS.get(reason)
