"""Backfill outcomes of a pending prediction (pure): hit, miss, voided, or still pending.

The store summarises what happened inside each prediction's window ``(t0, min(window_end, now)]``
into a :class:`WindowObservation`; :func:`classify` turns that into an outcome with a short
explanation carrying the numbers. Semantics (reference "命中窗口与回填"):

- hit: a fault event of the predicted card (same UUID) lies inside the window: an
  uncorrectable-ECC increase point, or, when the prediction's OWN rule version lists
  ``fault_xids`` (v2-ecc-xid), an increase of one of those memory-XID counts
  (:mod:`gpu_health.evaluator.rules.faults`). Decided as soon as it is seen: nothing later can undo
  it, and alerts need it early. The earlier of the two events is the one reported;
- otherwise nothing is decided before ``now >= window_end``. Then:
- voided: no sample at all in the window (collection stalled, node offline), a sample with a
  different UUID (card swapped), or no sample with a known uncorrectable count (the outcome was
  never observable: counting it as a miss would turn "unknown" into "no fault"). XID rows do
  not make a window observable: they are written on change only, so their absence cannot show
  that the kernel log was being read;
- miss: the window is over, it holds known counts of the predicted card, and none increased.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gpu_health.clock import rfc3339
from gpu_health.evaluator.model import ResolvedStatus

Status = ResolvedStatus


@dataclass(frozen=True, slots=True)
class WindowObservation:
    """What the samples show inside one pending prediction's window (up to ``now``)."""

    prediction_id: str
    gpu_uuid: str | None  # the predicted card
    matured: bool  # now >= window_end
    samples: int  # rows of the slot in the window (any UUID)
    other_uuid_samples: int
    other_uuid: str | None  # first different UUID seen
    other_uuid_at: datetime | None
    known_uncorrected: int  # same-UUID rows with a known uncorrectable count
    uncorrected_at_t0: int | None
    max_uncorrected: int | None
    last_sample_at: datetime | None
    fault_at: datetime | None  # first uncorrectable increase point in the window
    fault_before: int | None
    fault_after: int | None
    xid_fault_at: datetime | None = None  # first memory-XID event (version's fault_xids)
    xid: int | None = None
    xid_before: int | None = None
    xid_after: int | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    prediction_id: str
    status: Status
    explanation: str


def _ts(value: datetime | None) -> str:
    return "unknown" if value is None else rfc3339(value, "seconds")


def classify(o: WindowObservation) -> Outcome | None:
    """The outcome, or None while the prediction stays pending."""
    if o.xid_fault_at is not None and (o.fault_at is None or o.xid_fault_at < o.fault_at):
        return Outcome(
            o.prediction_id, "hit",
            f"memory XID {o.xid} count {o.xid_before} -> {o.xid_after} at "
            f"{_ts(o.xid_fault_at)}, inside the window",
        )
    if o.fault_at is not None:
        return Outcome(
            o.prediction_id, "hit",
            f"uncorrectable ECC {o.fault_before} -> {o.fault_after} at {_ts(o.fault_at)}, "
            "inside the window",
        )
    if not o.matured:
        return None
    if o.samples == 0:
        return Outcome(o.prediction_id, "voided",
                       "no sample in the window (collection stalled or node offline)")
    if o.other_uuid_samples > 0:
        return Outcome(
            o.prediction_id, "voided",
            f"card swapped: UUID {o.other_uuid or '(none)'} seen at {_ts(o.other_uuid_at)} "
            f"(predicted {o.gpu_uuid or '(none)'}); {o.other_uuid_samples} of {o.samples} "
            "samples differ",
        )
    if o.known_uncorrected == 0:
        return Outcome(
            o.prediction_id, "voided",
            f"uncorrectable ECC count unknown in all {o.samples} samples of the window",
        )
    start = "unknown" if o.uncorrected_at_t0 is None else str(o.uncorrected_at_t0)
    return Outcome(
        o.prediction_id, "miss",
        f"no uncorrectable ECC increase over the window ({start} at t0, max {o.max_uncorrected} "
        f"in {o.known_uncorrected} known samples, last at {_ts(o.last_sample_at)})",
    )


def prediction_class(t0: datetime, unc0: int | None, evidence: datetime | None) -> str:
    """A prediction's class for the per-class statistics: ``repeat`` when its card showed a
    fault at or before t0 (an uncorrectable count above 0 at t0, or fault evidence no later),
    else ``first_fault`` (the predictions that matter most: a card not known to be failing)."""
    repeat = (unc0 is not None and unc0 > 0) or (evidence is not None and evidence <= t0)
    return "repeat" if repeat else "first_fault"
