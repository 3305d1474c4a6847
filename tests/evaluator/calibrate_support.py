"""A synthetic fleet with a planted precursor, for the calibration tests and bench/calibrate.py.

Seeded and described by its events, like a fleet's own history would be (every card observed
for the whole period; the events become counter histories through the events importer's code,
:func:`gpu_health.evaluator.backtest.events.history`, and rows through the live write rule's closed
form):

- ``ramp`` (30% of the cards): the correctable-error count grows for two weeks, each day a few
  more errors than the day before (from about one a day to 10-25 a day, a card's own slope with
  noise), then an uncorrectable error. The shipped v1/v2 thresholds (32 new errors a day, three
  rising days) see few of them; a lower magnitude gate sees most;
- ``ramp-survives`` (5%): the same ramp without a fault afterwards (a true rule still misses);
- ``sudden`` (7%): an uncorrectable error with no correctable error before it (no rule on
  correctable errors can see it coming);
- ``noisy`` (25%): correctable errors at a steady random rate (0.5-3 a day) plus, now and then,
  a burst of 8-80 in an hour (what makes eager thresholds imprecise);
- ``quiet``: nothing at all.

Fault days fall between day 20 and five days before the end, so both parts of a time split hold
faults.

A weak signal is planted on a written fleet by :func:`plant_weak`: per card, the hardware
thermal slowdown time from an onset on (two hours of slowdown a day, what the weak
``thermal_slowdown`` signal reads), the PCIe replays (5,000 a day, what
``pcie_replays_rising`` reads) or the NVLink errors (24 a day, what ``nvlink_errors_rising``
reads), or none (known quiet, never unknown). :func:`heat_before_faults`
gives most ``ramp`` cards their onset a week before their fault and a few other cards one at
random; :func:`heat_as_noise` gives cards one by a coin of their own, whatever their history.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpu_health.evaluator.backtest.card_history import CardHistory, history
from gpu_health.evaluator.backtest.events import Kind
from gpu_health.evaluator.backtest.history import write_histories
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.history.backtest import open_backtest, start_run

START = datetime(2026, 1, 1, tzinfo=UTC)
Events = list[tuple[float, Kind]]


def _spread(rng: random.Random, day: float, n: int) -> list[float]:
    return sorted(day + rng.random() for _ in range(max(0, n)))


def ramp(rng: random.Random, fault_day: float) -> Events:
    slope = rng.uniform(0.7, 1.8)
    events: Events = []
    for k in range(14):  # k = 0: 14 days before the fault
        n = round(slope * (k + 1) + rng.gauss(0, 1))
        events += [(t, "corrected") for t in _spread(rng, fault_day - 14 + k, n)]
    return events


def noisy(rng: random.Random, days: int) -> Events:
    rate = rng.uniform(0.5, 3)
    events: Events = []
    for day in range(days):
        events += [(t, "corrected") for t in _spread(rng, day, _poisson(rng, rate))]
        if rng.random() < 1 / 30:
            at = day + rng.random()
            events += [(at + i / 1440, "corrected") for i in range(rng.randint(8, 80))]
    return events


def _poisson(rng: random.Random, rate: float) -> int:
    count, t = 0, rng.expovariate(rate)
    while t < 1:
        count, t = count + 1, t + rng.expovariate(rate)
    return count


def card_events(c: int, days: int, seed: int) -> tuple[str, Events]:
    """(profile, [(day, kind)]) of card ``c``."""
    rng = random.Random(seed * 1_000_003 + c)
    h = (c * 7919) % 100
    fault = rng.uniform(20, days - 5)
    if h < 30:
        return "ramp", [*ramp(rng, fault), (fault, "uncorrected")]
    if h < 35:
        return "ramp-survives", ramp(rng, fault)
    if h < 42:
        return "sudden", [(fault, "uncorrected")]
    if h < 67:
        return "noisy", noisy(rng, days)
    return "quiet", []


def null_events(c: int, days: int, seed: int) -> tuple[str, Events]:
    """Card ``c`` of a *null fleet*: a correctable history like the planted fleet's (35% noisy
    with bursts, 20% a ramp at a random time, the rest quiet) and, by a coin of its own (a
    separate generator: independent of that history), a fault at a uniform time for half of the
    cards. Nothing there predicts a fault. Profile names end in ``+fault`` for those."""
    rng = random.Random(seed * 1_000_003 + c)
    h = rng.random()
    if h < 0.35:
        name, events = "noisy", noisy(rng, days)
    elif h < 0.55:
        name, events = "ramp", ramp(rng, rng.uniform(20, days))
    else:
        name, events = "quiet", []
    coin = random.Random(seed * 7_000_003 + c)
    if coin.random() < 1 / 2:
        return name + "+fault", [*events, (coin.uniform(20, days - 5), "uncorrected")]
    return name, events


def bait_events(c: int, days: int, seed: int) -> tuple[str, Events]:
    """Card ``c`` of a *bait fleet*, where v1's thresholds can see the precursor and its shape
    gate meets what fools it:

    - ``ramp`` (30%): two weeks of correctable errors, 4-9 more each day than the day before
      (about 60-130 on the last day), then an uncorrectable error;
    - ``sudden`` (5%): an uncorrectable error with no correctable error before it;
    - ``bursty`` (25%): almost no background (a few a week), and every 3-8 days a burst of
      30-300 errors within 10-60 minutes; never fails;
    - ``steady`` (20%): 40-120 errors a day at a steady random rate; never fails;
    - ``quiet``: nothing at all."""
    rng = random.Random(seed * 1_000_003 + c)
    h = (c * 7919) % 100
    fault = rng.uniform(20, days - 5)
    if h < 30:
        slope = rng.uniform(4, 9)
        events: Events = []
        for k in range(14):
            n = round(slope * (k + 1) + rng.gauss(0, 2))
            events += [(t, "corrected") for t in _spread(rng, fault - 14 + k, n)]
        return "ramp", [*events, (fault, "uncorrected")]
    if h < 35:
        return "sudden", [(fault, "uncorrected")]
    if h < 60:
        events = [(t, "corrected") for day in range(days)
                  for t in _spread(rng, day, _poisson(rng, 0.5))]
        at = rng.uniform(0, 5)
        while at < days:
            minutes = rng.uniform(10, 60) / 1440
            events += [(at + rng.random() * minutes, "corrected")
                       for _ in range(rng.randint(30, 300))]
            at += rng.uniform(3, 8)
        return "bursty", sorted(events)
    if h < 80:
        rate = rng.uniform(40, 120)
        return "steady", [(t, "corrected") for day in range(days)
                          for t in _spread(rng, day, _poisson(rng, rate))]
    return "quiet", []


def precursor_fleet(cards: int, days: int, *, step: timedelta,
                    seed: int = 11) -> tuple[list[CardHistory], dict[str, int]]:
    """Histories of ``cards`` cards on 8-GPU nodes, all observed for ``days`` days."""
    return fleet_histories(card_events, cards, days, step=step, seed=seed)


def fleet_histories(profile: Callable[[int, int, int], tuple[str, Events]], cards: int,
                    days: int, *, step: timedelta, seed: int,
                    start: datetime = START) -> tuple[list[CardHistory], dict[str, int]]:
    """Card ``c``'s events from ``profile(c, days, seed)`` -> histories on 8-GPU nodes, every
    card observed for the whole period; and how many cards each profile has."""
    histories: list[CardHistory] = []
    profiles: dict[str, int] = {}
    for c in range(cards):
        name, events = profile(c, days, seed)
        profiles[name] = profiles.get(name, 0) + 1
        histories.append(history(
            f"node-{c // 8:04d}", c % 8, name,
            [(start + timedelta(days=t), kind) for t, kind in events],
            start=start, stop=start + timedelta(days=days), step=step))
    return histories, profiles


def write_fleet(path: Path, cards: int, days: int, *, step: timedelta,
                keepalive: timedelta = timedelta(minutes=5), seed: int = 11) -> int:
    """A backtest file holding the fleet (what ``--db`` of an earlier import reads)."""
    return write_profiled_fleet(path, card_events, cards, days, step=step, keepalive=keepalive,
                                seed=seed)[0]


def write_profiled_fleet(path: Path, profile: Callable[[int, int, int], tuple[str, Events]],
                         cards: int, days: int, *, step: timedelta,
                         keepalive: timedelta = timedelta(minutes=5),
                         seed: int = 11) -> tuple[int, dict[str, int]]:
    """A backtest file holding the fleet of ``profile`` (:func:`fleet_histories`); the rows
    written and how many cards each profile has."""
    histories, profiles = fleet_histories(profile, cards, days, step=step, seed=seed)
    db: Database = open_backtest(path, live=(), importing=True)
    try:
        start_run(db, now=datetime.now(UTC), kind="synthetic", source=None, options={})
        return write_histories(db, histories, step=step, keepalive=keepalive), profiles
    finally:
        db.close()


# (onset day, minutes of thermal slowdown a day) of a heated card
Heat = tuple[float, float]
HEAT_MINUTES_A_DAY = 120.0
# PCIe replays a day of a card planted with replays: 5x what v5-ecc-weak-pcie needs to fire
REPLAYS_A_DAY = 5000.0
# NVLink errors a day of a card planted with them: one an hour, 24x what v6-ecc-weak-links needs
NVLINK_ERRORS_A_DAY = 24.0
_PER_DAY = {"replays": REPLAYS_A_DAY, "nvlink": NVLINK_ERRORS_A_DAY}


def heat_before_faults(c: int, days: int, seed: int) -> Heat | None:
    """Card ``c`` of :func:`card_events`: 90% of the ``ramp`` cards run hot for the 7 days
    before their fault; 5% of every other card from a random day on."""
    name, events = card_events(c, days, seed)
    rng = random.Random(seed * 5_000_011 + c)
    if name == "ramp" and rng.random() < 0.9:
        fault = max(t for t, kind in events if kind == "uncorrected")
        return fault - 7, HEAT_MINUTES_A_DAY
    if name != "ramp" and rng.random() < 0.05:
        return rng.uniform(0, days), HEAT_MINUTES_A_DAY
    return None


def heat_as_noise(c: int, days: int, seed: int) -> Heat | None:
    """30% of the cards, by a coin of their own, run hot from a uniform random day on: the
    heat says nothing about their faults."""
    rng = random.Random(seed * 5_000_011 + c)
    return (rng.uniform(0, days), HEAT_MINUTES_A_DAY) if rng.random() < 0.3 else None


def plant_weak(path: Path, heat: Callable[[int, int, int], Heat | None], cards: int, days: int,
               *, seed: int = 11, start: datetime = START, signal: str = "heat") -> int:
    """Fill the weak layer's columns of a written fleet (:func:`write_profiled_fleet`, the same
    cards, days and seed): every card's link at x16 of x16 and software thermal slowdown 0.
    ``signal`` "heat": the hardware thermal slowdown 0 before the card's onset and growing by
    its minutes a day after it, the PCIe replays 40 and the NVLink errors 0 throughout;
    "replays": the replays 40 before the onset and growing by ``REPLAYS_A_DAY`` after it;
    "nvlink": the NVLink errors 0 before the onset and growing by ``NVLINK_ERRORS_A_DAY``
    after it (for both, the schedule's minutes are not used; the other signals stay quiet).
    The values go into the rows already written (keep-alive rows every 5 minutes at the
    least), not into rows of their own as the live write rule would add: a boundary reads them
    at most 5 minutes late. Returns the cards planted."""
    rows = []
    for c in range(cards):
        h = heat(c, days, seed)
        onset = None if h is None else (start + timedelta(days=h[0])).timestamp()
        per_day = 0.0 if h is None else h[1] * 60e6 if signal == "heat" else _PER_DAY[signal]
        rows.append(f"('node-{c // 8:04d}', {c % 8}, {'NULL' if onset is None else onset}, "
                    f"{per_day / 86_400})")  # per second
    grown = ("CASE WHEN h.onset IS NULL THEN 0 ELSE CAST(greatest(0, epoch(s.sampled_at) - "
             "h.onset) * h.rate AS BIGINT) END")
    db = DuckDBDatabase(path)
    try:
        db.execute(f"""
UPDATE gpu_health_samples AS s
SET hw_thermal_slowdown_us = {grown if signal == "heat" else 0},
    pcie_replays = 40 + {grown if signal == "replays" else 0},
    nvlink_errors = {grown if signal == "nvlink" else 0},
    sw_thermal_slowdown_us = 0, pcie_link_width = 16, pcie_link_width_max = 16
FROM (VALUES {", ".join(rows)}) AS h(node_id, gpu_index, onset, rate)
WHERE s.node_id = h.node_id AND s.gpu_index = h.gpu_index""")
    finally:
        db.close()
    return sum(1 for c in range(cards) if heat(c, days, seed) is not None)
