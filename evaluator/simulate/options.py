"""What ``gpu-health-evaluator simulate`` was asked to do, validated from its arguments."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from gpu_health.durations import parse_duration
from gpu_health.evaluator.config.file import Config
from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.config.writes import DEFAULT_KEEPALIVE
from gpu_health.evaluator.simulate.profiles import PROFILES
from gpu_health.timestamps import parse_timestamp


@dataclass(frozen=True, slots=True)
class SimulateOptions:
    """What ``gpu-health-evaluator simulate`` was asked to do (validated)."""

    storage_path: Path
    purge: bool = False
    profiles: tuple[str, ...] = ()
    cards: int = 4
    days: float = 14.0
    step_seconds: float = 60.0
    node_prefix: str = "sim-"
    seed: int = 0
    end: datetime | None = None  # None: now
    keepalive: timedelta = DEFAULT_KEEPALIVE


def simulate_options(args: argparse.Namespace, config: Config) -> SimulateOptions:
    """Validate the simulate arguments; ConfigError lists every problem."""
    c = Checker()
    profiles = tuple(p.strip() for p in str(args.profiles).split(",") if p.strip())
    for name in profiles:
        if name not in PROFILES:
            c.problem(f"--profiles: unknown profile {name!r} (known: {', '.join(PROFILES)})")
    if not profiles and not args.purge:
        c.problem("--profiles: name at least one profile")
    if not 1 <= args.cards <= 1024:
        c.problem(f"--cards must be in 1..1024, got {args.cards}")
    if not 0 < args.days <= 3650:
        c.problem(f"--days must be in (0, 3650], got {args.days:g}")
    step = parse_duration(args.step)
    if step is None:
        c.problem(f"--step must be a positive duration like 60s, got {args.step!r}")
    if not args.node_prefix or any(ch.isspace() for ch in args.node_prefix):
        c.problem("--node-prefix must be non-empty without spaces")
    end = None
    if args.end is not None:
        try:
            end = parse_timestamp(args.end.strip())
        except ValueError as exc:
            c.problem(f"--end {args.end!r}: {exc}")
    c.raise_if_any()
    return SimulateOptions(
        storage_path=args.storage or config.storage.path, purge=args.purge, profiles=profiles,
        cards=args.cards, days=args.days, step_seconds=step or 60.0,
        node_prefix=args.node_prefix, seed=args.seed, end=end,
        keepalive=config.keepalive,
    )
