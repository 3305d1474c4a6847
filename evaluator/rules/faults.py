"""Fault events: what counts as "the card really failed" for backfill and recall (pure).

The definition is part of a rule set (its frozen ``fault_xids`` parameter), so every prediction
is judged by the definition of the version that made it:

- ``ecc_uncorrected`` (every version): an increase of the uncorrectable ECC count of the card;
- ``xid:<n>`` for each code in ``fault_xids`` (empty, i.e. ECC-only, unless the rule file lists
  codes; ``v2-ecc-xid`` lists all of :data:`MEMORY_XIDS`): an increase of the card's count of
  kernel-log Xid lines with that code (see ``evaluator/store/readings/xid_samples.py`` for the exact
  increase rule across exporter restarts).

Only memory-related XIDs may be fault events. Others are refused when a rule set is loaded:
XID 79 (fallen off the bus) cannot be told apart from a node going offline, and XID 13/31/43
and friends are mostly application errors, not hardware faults.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Final

from gpu_health.contract import MEMORY_XIDS

ECC_FAULT: Final = "ecc_uncorrected"

# NVIDIA XID catalogue: 48 double-bit ECC error; 63 ECC page retirement or row-remap recording
# event; 64 page retirement / row-remap recording failure; 94 contained ECC error; 95 uncontained
# ECC error (94/95 are Ampere and newer).


def fault_events(fault_xids: Iterable[int]) -> list[str]:
    """The names of the fault-event kinds of a definition, as the statistics report them."""
    return [ECC_FAULT, *(f"xid:{x}" for x in sorted(set(fault_xids)))]


def fault_xids_from_json(params_json: str | None) -> tuple[int, ...]:
    """The ``fault_xids`` frozen in a stored rule version's parameters (``params_json``).

    A version recorded before the parameter existed, or not recorded at all (None), or a record
    that cannot be read, is ECC-only: an XID is never a fault unless the version said so.
    """
    if not params_json:
        return ()
    try:
        raw = json.loads(params_json).get("fault_xids", [])
    except (ValueError, AttributeError):
        return ()
    if not isinstance(raw, list):
        return ()
    return tuple(sorted({x for x in raw if type(x) is int and x in MEMORY_XIDS}))
