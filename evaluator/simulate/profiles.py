"""Simulated cards: pure generators of readings (start, end, step, seed -> Samples), no I/O.

Each profile yields one reading per ``step`` in ``[start, end)`` for one card, as the scrape
loop would see it; :func:`change_only` applies the production write rule (``ingest_rule.decide``)
so the rows match what the evaluator would have stored. Every sample carries
``source='simulated'`` (the key's source is forced), so simulated data never mixes with real.
Cards look like an A100: retired pages unknown (Ampere remaps rows instead), remap counters 0.

Profiles (event times are days after ``start``; events past ``end`` simply do not happen):

- ``healthy``: a small constant corrected count with rare single +1 events (about one per
  three days);
- ``degrading``: corrected ECC accelerating quadratically after ``onset`` (day 1):
  ``base + floor(a * t**2)`` with ``a = 2.6`` per day^2 and t in days since onset. The last-24 h
  increase is then ``a * (2t - 1)``: it reaches 32 at t = 6.65 (day 7.65; 28.6 at day 7, 33.8
  at day 8), at 1.86x the 7-day daily mean (>= 1.2), and each 24 h window is larger than the
  previous one, so the v1 rule fires from about day 7.7 and would keep firing until the ratio
  falls under 1.2 after day 19.5 (checked against the rules engine: first prediction at day
  7.75, a hit). The card then fails: the uncorrected counter becomes 1 at day 10
  (``fail_at_days``; None for never);
- ``burst``: one jump of +400 corrected at day 5, flat before and after (a single window);
- ``uncorrectable``: the uncorrected counter jumps 0 -> 2 (and corrected +5) at day 6;
- ``card_swap``: at day 7 the slot holds a new card: new UUID, counters restart low;
- ``stall``: healthy, but no readings at all from day 4 to day 6 (collection stopped).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Final

from gpu_health.contract import SOURCE_SIMULATED
from gpu_health.evaluator.config.writes import DEFAULT_KEEPALIVE
from gpu_health.evaluator.ingest.write_rule import decide
from gpu_health.evaluator.model import CardKey, Counters, Sample

PROFILES: Final = ("healthy", "degrading", "burst", "uncorrectable", "card_swap", "stall")
DEGRADING_ONSET_DAYS: Final = 1.0
DEGRADING_RATE: Final = 2.6  # corrected errors per day^2
DEGRADING_FAIL_AT_DAYS: Final = 10.0
BURST_AT_DAYS: Final = 5.0
BURST_SIZE: Final = 400
UNCORRECTABLE_AT_DAYS: Final = 6.0
SWAP_AT_DAYS: Final = 7.0
STALL_DAYS: Final = (4.0, 6.0)
HEALTHY_EVENT_EVERY_DAYS: Final = 3.0

# (days since start) -> (uuid, counters), or None for "no reading at this time"
_Reading = Callable[[float], tuple[str, Counters] | None]


def card_uuid(rng: random.Random) -> str:
    """An NVIDIA-shaped UUID (GPU-8-4-4-4-12 hex) from ``rng``."""
    digits = f"{rng.getrandbits(128):032x}"
    return f"GPU-{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def _a100(uncorrected: int, corrected: int) -> Counters:
    return Counters(ecc_uncorrected_total=uncorrected, ecc_corrected_total=corrected,
                    retired_pages=None, remapped_rows_pending=0, remapped_rows_failure=0)


class _Noise:
    """Rare +1 corrected events, drawn per reading so the stream stays reproducible."""

    def __init__(self, rng: random.Random, step_days: float) -> None:
        self.rng = rng
        self.p = step_days / HEALTHY_EVENT_EVERY_DAYS
        self.count = 0

    def __call__(self) -> int:
        if self.rng.random() < self.p:
            self.count += 1
        return self.count


def _profile(name: str, rng: random.Random, step_days: float, fail_at: float | None) -> _Reading:
    uuid, base = card_uuid(rng), rng.randint(0, 20)
    noise = _Noise(rng, step_days)
    if name in ("healthy", "stall"):
        lo, hi = STALL_DAYS if name == "stall" else (math.inf, math.inf)
        return lambda d: None if lo <= d < hi else (uuid, _a100(0, base + noise()))
    if name == "degrading":
        def degrading(d: float) -> tuple[str, Counters]:
            t = max(0.0, d - DEGRADING_ONSET_DAYS)
            failed = fail_at is not None and d >= fail_at
            return uuid, _a100(1 if failed else 0, base + math.floor(DEGRADING_RATE * t * t))
        return degrading
    if name == "burst":
        return lambda d: (uuid, _a100(0, base + (BURST_SIZE if d >= BURST_AT_DAYS else 0)))
    if name == "uncorrectable":
        return lambda d: (uuid, _a100(2, base + 5) if d >= UNCORRECTABLE_AT_DAYS
                          else _a100(0, base))
    if name == "card_swap":
        new_uuid, new_base = card_uuid(rng), rng.randint(0, 3)
        return lambda d: (new_uuid, _a100(0, new_base)) if d >= SWAP_AT_DAYS else \
            (uuid, _a100(0, base + 30))
    raise ValueError(f"unknown simulation profile {name!r}; known: {', '.join(PROFILES)}")


def readings(profile: str, key: CardKey, start: datetime, end: datetime, step: timedelta,
             seed: int = 0, *, fail_at_days: float | None = DEGRADING_FAIL_AT_DAYS
             ) -> Iterator[Sample]:
    """Every reading of one simulated card in ``[start, end)``, one per ``step``.

    Deterministic for a given (profile, node, gpu index, seed). ``fail_at_days`` only affects
    ``degrading``.
    """
    if step <= timedelta(0):
        raise ValueError("step must be positive")
    card = CardKey(key.node_id, key.gpu_index, SOURCE_SIMULATED)
    rng = random.Random(f"{seed}:{profile}:{key.node_id}:{key.gpu_index}")
    reading = _profile(profile, rng, step / timedelta(days=1), fail_at_days)
    at = start
    while at < end:
        value = reading((at - start) / timedelta(days=1))
        if value is not None:
            yield Sample(card, value[0], at, value[1])
        at += step


# The demo's live card (evaluator/demo/): the days before the demo starts, so the v2 trend
# signal can judge it within minutes. Correctable errors added per 24 h, oldest day first: the
# last three days grow (k = 3 strictly increasing windows) while the newest stays under
# min_increase (32), so the history alone predicts nothing and the live ramp (1, 2, 3, ... per
# advance) crosses it within the first minute.
LIVE_DAILY: Final = (4, 4, 4, 4, 4, 4, 6, 10, 20)


def live_history(key: CardKey, uuid: str, end: datetime, step: timedelta,
                 daily: tuple[int, ...] = LIVE_DAILY) -> Iterator[Sample]:
    """One reading per ``step`` over ``len(daily)`` days ending at ``end`` (exclusive): the
    correctable count grows by ``daily[i]`` over day ``i``, evenly within the day; it reaches
    ``sum(daily)`` at ``end``. Counters as the demo's fake H100 shows them."""
    card = CardKey(key.node_id, key.gpu_index, SOURCE_SIMULATED)
    start = end - timedelta(days=len(daily))
    at = start
    while at < end:
        days = (at - start) / timedelta(days=1)
        i = min(int(days), len(daily) - 1)
        count = sum(daily[:i]) + math.floor(daily[i] * (days - i))
        yield Sample(card, uuid, at, Counters(ecc_uncorrected_total=0, ecc_corrected_total=count,
                                              retired_pages=None, remapped_rows_pending=0,
                                              remapped_rows_failure=0))
        at += step


def change_only(stream: Iterable[Sample], keepalive: timedelta = DEFAULT_KEEPALIVE
                ) -> Iterator[Sample]:
    """The rows the evaluator would store for ``stream`` (one card, in time order)."""
    last: Sample | None = None
    for sample in stream:
        if decide(sample, last, keepalive).write:
            last = sample
            yield sample


def steps_between(start: datetime, end: datetime, step: timedelta) -> int:
    """How many readings ``readings`` visits (for progress bars)."""
    return max(0, math.ceil((end - start) / step))
