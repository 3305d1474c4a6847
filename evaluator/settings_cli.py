"""Evaluator command line: subcommand table plumbing and per-command options (argv reader).

Part of the settings: together with ``evaluator/settings.py`` the only code that reads argv or
the environment. ``evaluator.main`` owns the table of subcommands; each entry is a
:class:`Command` (help line, argument adder, runner), so adding ``demo`` or ``backtest`` is one
line there.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from evaluator.settings import Config
from evaluator.settings_values import Checker, parse_duration


@dataclass(frozen=True, slots=True)
class Command:
    """A subcommand: its help line, how it adds its arguments, and what runs it."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def parse_args(argv: Sequence[str] | None, commands: Mapping[str, Command],
               default: str = "run") -> argparse.Namespace:
    """Parse argv into a namespace whose ``command`` names an entry of ``commands``.

    Without a subcommand (``gpu-health-evaluator --config x.yml``) ``default`` is used.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="gpu-health-evaluator",
        description="Scrape gpu-health exporters, store change-only samples, predict, alert.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in commands.items():
        child = sub.add_parser(name, help=command.help, description=command.help)
        child.add_argument("--config", type=Path, default=None,
                           help="YAML config file (default: built-in defaults)")
        child.add_argument("--log-level", default="INFO",
                           choices=("DEBUG", "INFO", "WARNING", "ERROR"))
        command.add_arguments(child)
    if not args or (args[0].startswith("-") and args[0] not in ("-h", "--help")):
        args.insert(0, default)
    return parser.parse_args(args)


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
    keepalive_seconds: float = 300.0


def simulate_arguments(parser: argparse.ArgumentParser) -> None:
    from evaluator.simulate import PROFILES

    parser.add_argument("--purge", action="store_true",
                        help="delete every simulated sample and prediction, then exit")
    parser.add_argument("--profiles", default=",".join(PROFILES),
                        help=f"comma-separated profiles (default: all of {', '.join(PROFILES)})")
    parser.add_argument("--cards", type=int, default=4, help="GPUs per simulated node (4)")
    parser.add_argument("--days", type=float, default=14.0, help="days of history (14)")
    parser.add_argument("--step", default="60s", help="reading interval, e.g. 60s (60s)")
    parser.add_argument("--node-prefix", default="sim-",
                        help="node id prefix; nodes are <prefix><profile> (sim-)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--end", default=None,
                        help="end of the history, ISO 8601 with a zone (default: now)")
    parser.add_argument("--storage", type=Path, default=None,
                        help="DuckDB file (default: storage.path of --config)")


def simulate_options(args: argparse.Namespace, config: Config) -> SimulateOptions:
    """Validate the simulate arguments; ConfigError lists every problem."""
    from evaluator.simulate import PROFILES

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
            end = datetime.fromisoformat(args.end)
        except ValueError:
            c.problem(f"--end {args.end!r} is not an ISO 8601 date-time")
        if end is not None and end.tzinfo is None:
            c.problem("--end needs a time zone (e.g. 2026-01-31T00:00:00Z)")
    c.raise_if_any()
    return SimulateOptions(
        storage_path=args.storage or config.storage_path, purge=args.purge, profiles=profiles,
        cards=args.cards, days=args.days, step_seconds=step or 60.0,
        node_prefix=args.node_prefix, seed=args.seed, end=end,
        keepalive_seconds=config.keepalive_seconds,
    )


def environment() -> Mapping[str, str]:
    """The process environment (for callers outside this module, which must not read it)."""
    return os.environ
