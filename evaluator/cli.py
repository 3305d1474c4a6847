"""The evaluator's command line: the one module that declares arguments (argparse).

``COMMANDS`` names every subcommand with its help line and its arguments;
``gpu_health.evaluator.main`` maps the same names to what runs them (a test keeps the two tables
equal). Validation of the parsed arguments into options lives with each command
(``simulate/options.py``, ``demo/__init__.py``, ``backtest/command.py``,
``calibrate/command.py``) and lists every problem at once.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from gpu_health import __version__
from gpu_health.evaluator.backtest.events import PRESETS
from gpu_health.evaluator.check import CHECK_FORMATS, DEFAULT_TIMEOUT_S, parse_timeout
from gpu_health.evaluator.config.storage import DEFAULT_STORAGE
from gpu_health.evaluator.ingest.prometheus.metricsets import (
    DEFAULT_MAX_POINTS,
    LIMIT_POINTS,
    METRIC_SETS,
)
from gpu_health.evaluator.simulate.profiles import PROFILES
from gpu_health.logformat import FORMATS, LEVEL_NAMES, level_number

RUN_HELP: Final = ("scrape, store change-only samples, predict, serve /metrics and the API "
                   "(default)")
SIMULATE_HELP: Final = "write source='simulated' samples for demo profiles, or --purge them"
TOKENS_HASH_HELP: Final = "print the sha256 of an API token read from stdin (tokens file)"
BACKTEST_HELP: Final = ("replay history (Prometheus or an events CSV) through the rules into a "
                        "separate DuckDB file and report precision/recall per rule version")
COMPACT_HELP: Final = ("rewrite the (stopped) evaluator's DuckDB file to its live data: the space "
                       "freed by dropped indexes and deleted rows goes back to the disk")
CALIBRATE_HELP: Final = ("search rule thresholds on one part of the history, confirm the choice "
                         "on the later part it was not tuned on, and write a new rule version")
CHECK_HELP: Final = ("one node's GPU health as a Nagios check (exit 0 OK, 1 warning, 2 "
                     "critical, 3 unknown): for Slurm's HealthCheckProgram, prolog/epilog, NHC")
DEMO_HELP: Final = ("run the exporter (fake tools when no nvidia-smi) and the evaluator on a "
                    "demo store with simulated history; print where to look")


def run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--web.config.file", dest="web_config", type=Path, default=None,
                   help="exporter-toolkit web config: TLS and basic auth (docs/security.md)")


def _no_arguments(_parser: argparse.ArgumentParser) -> None:
    return None


def simulate_arguments(parser: argparse.ArgumentParser) -> None:
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
                        help="end of the history, RFC 3339 with an offset or Unix seconds "
                        "(default: now)")
    parser.add_argument("--storage", type=Path, default=None,
                        help="DuckDB file (default: storage.path of --config)")


def compact_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", type=Path, default=None,
                        help="DuckDB file (default: storage.path of --config)")


def check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--evaluator", required=True, metavar="URL",
                   help="the evaluator's base URL, e.g. http://evaluator:10347")
    p.add_argument("--node", default=None,
                   help="the node to check, as the evaluator names it (default: $NODE_NAME, else "
                        "this host's name)")
    p.add_argument("--token-file", type=Path, default=None,
                   help="a file holding an API token with nodes:read (docs/api.md)")
    p.add_argument("--ca-file", type=Path, default=None,
                   help="verify an https evaluator against this CA bundle")
    p.add_argument("--timeout", type=parse_timeout, default=DEFAULT_TIMEOUT_S,
                   help=f"seconds for the whole check ({DEFAULT_TIMEOUT_S:g}; at most 55, under "
                        "Slurm's 60 s)")
    p.add_argument("--format", choices=CHECK_FORMATS, default="nagios",
                   help="nagios (exit 0-3, Slurm and NHC) or node-problem-detector (its custom "
                        "plugin protocol: exit 0 no problem, 1 problem, 2 unknown; one line)")


def demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=None,
                        help="stop after this many seconds (default: run until Ctrl-C)")
    parser.add_argument("--storage", type=Path, default=DEFAULT_STORAGE,
                        help=f"DuckDB file (default: {DEFAULT_STORAGE})")
    parser.add_argument("--port", type=int, default=10347,
                        help="evaluator port on 127.0.0.1 (10347; 0 picks a free one)")
    parser.add_argument("--exporter-port", type=int, default=10346,
                        help="exporter port on 127.0.0.1 (10346; 0 picks a free one)")


def backtest_arguments(p: argparse.ArgumentParser) -> None:
    _input_arguments(p)
    _rules_arguments(p)
    _cost_arguments(p)


def calibrate_arguments(p: argparse.ArgumentParser) -> None:
    _input_arguments(p)
    cal = p.add_argument_group("calibration")
    cal.add_argument("--rules", type=Path, metavar="FILE",
                     help="the base version (default: rules.active in rules.dir of --config)")
    cal.add_argument("--search", action="append", default=[], metavar="NAME=V1,V2",
                     help="values of a frozen parameter to try (repeatable: cartesian product; "
                          "default: docs/calibration.md's space over the trend parameters)")
    cal.add_argument("--train-fraction", type=float, default=0.6,
                     help="share of the period (by time) the choice is made on (0.6)")
    cal.add_argument("--objective", choices=("recall", "cost"), default="recall",
                     help="recall: the highest train first-fault recall at --min-precision; "
                          "cost: the most GPU-hours saved (needs the cost options)")
    cal.add_argument("--min-precision", type=float, default=0.2,
                     help="train first-fault precision a candidate must reach (0.2)")
    cal.add_argument("--min-test-faults", type=int, default=20,
                     help="first faults the test part needs for a verdict (20)")
    cal.add_argument("--output", type=Path, help="write the report as JSON")
    cal.add_argument("--write-rule", type=Path, metavar="DIR",
                     help="write the chosen version as DIR/<base>-cal-<hash>.yaml when the "
                          "verdict is 'better'")
    cal.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="progress bars on stderr (default: on a terminal)")
    _cost_arguments(p)


def _input_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--prometheus", metavar="URL", help="Prometheus base URL to import from")
    src.add_argument("--events", type=Path, metavar="CSV", help="CSV file of error events")
    p.add_argument("--db", type=Path, help="backtest DuckDB file (default: "
                   "./data/backtest-<UTC time>.duckdb); never the live database")
    period = p.add_argument_group("period")
    period.add_argument("--since", help="start, ISO 8601 with a zone or Unix seconds "
                        "(--prometheus: what is imported; --events or --db: what is replayed)")
    period.add_argument("--until", help="end (default: now for --prometheus, else the end of "
                        "the history)")
    _prometheus_arguments(p)
    _events_arguments(p)


def _cost_arguments(p: argparse.ArgumentParser) -> None:
    costs = p.add_argument_group("costs (Boixaderas et al., SC20; docs/calibration.md)")
    costs.add_argument("--cost-failure", type=float, metavar="H",
                       help="GPU-hours an unpredicted fault costs: job GPUs x (mean time since "
                            "the last checkpoint + restart)")
    costs.add_argument("--cost-mitigation", type=float, metavar="H",
                       help="GPU-hours one acted-on prediction costs (a drain or a checkpoint)")
    costs.add_argument("--mitigation-time", metavar="DURATION",
                       help="how long a mitigation takes: a fault warned of less than this "
                            "ahead is not saved (default 0s)")


def _prometheus_arguments(p: argparse.ArgumentParser) -> None:
    prom = p.add_argument_group("Prometheus input")
    prom.add_argument("--metrics", choices=sorted(METRIC_SETS), default="ours",
                      help="metric names to read: ours, dcgm (dcgm-exporter) or nvidia_smi "
                           "(nvidia_gpu_exporter) (default: ours)")
    prom.add_argument("--step", help="reading interval (default: scrape.interval of --config)")
    prom.add_argument("--node-label", help="label holding the node id (default: node / "
                      "Hostname, else the host of instance)")
    prom.add_argument("--selector", default="", help='extra label matchers, e.g. job="dcgm"')
    prom.add_argument("--max-points", type=int, default=DEFAULT_MAX_POINTS,
                      help=f"steps per series per request (default {DEFAULT_MAX_POINTS}; "
                           f"Prometheus refuses more than {LIMIT_POINTS})")
    prom.add_argument("--timeout", default="120s", help="per request (default 120s)")


def _events_arguments(p: argparse.ArgumentParser) -> None:
    ev = p.add_argument_group("events input")
    ev.add_argument("--preset", choices=sorted(PRESETS), help="column mapping of a known "
                    "dataset (calchas: the public HBM error dataset)")
    ev.add_argument("--node-columns", help="comma-separated columns naming the node")
    ev.add_argument("--gpu-column", help="column naming the device within the node")
    ev.add_argument("--time-column", help="column with the event time")
    ev.add_argument("--type-column", help="column with the event type")
    ev.add_argument("--correctable", help="comma-separated types counted as correctable")
    ev.add_argument("--uncorrectable", help="comma-separated types counted as uncorrectable")
    ev.add_argument("--ignore-types", default="", help="comma-separated types to ignore")
    ev.add_argument("--lead-in", help="observed time before a card's first event (default: "
                    "one --step, so the first event is an increase from 0)")
    ev.add_argument("--observe-after", help="observed time after a card's last event "
                    "(default: the longest hit window of the rule sets)")


def _rules_arguments(p: argparse.ArgumentParser) -> None:
    rules = p.add_argument_group("rules and report")
    rules.add_argument("--rules", type=Path, nargs="+", metavar="FILE",
                       help="rule files (default: rules.active in rules.dir of --config)")
    rules.add_argument("--sweep", action="append", default=[], metavar="NAME=V1,V2",
                       help="replay every value of a frozen parameter (repeatable: cartesian "
                            "product), e.g. window_days=7,30")
    rules.add_argument("--output", type=Path, help="write the report as JSON")
    rules.add_argument("--plot", type=Path, help="write a PNG of precision and recall per "
                       "version (needs matplotlib)")
    rules.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bars on stderr (default: on a terminal)")
    rules.add_argument("--no-baselines", dest="baselines", action="store_false",
                       help="skip the baselines of rules/baselines/ (replayed beside every "
                            "version by default; docs/backtest.md)")
    rules.add_argument("--every-tick", action="store_true",
                       help="evaluate every tick instead of skipping the ones that provably "
                            "change nothing (slower, same result)")


COMMANDS: Final[dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]]] = {
    "run": (RUN_HELP, run_arguments),
    "simulate": (SIMULATE_HELP, simulate_arguments),
    "tokens-hash": (TOKENS_HASH_HELP, _no_arguments),
    "backtest": (BACKTEST_HELP, backtest_arguments),
    "calibrate": (CALIBRATE_HELP, calibrate_arguments),
    "demo": (DEMO_HELP, demo_arguments),
    "compact": (COMPACT_HELP, compact_arguments),
    "check": (CHECK_HELP, check_arguments),
}


OLD_LOG_FLAG: Final = "--log-level"



def parse_args(argv: Sequence[str], default: str = "run") -> argparse.Namespace:
    """Parse argv into a namespace whose ``command`` names an entry of ``commands``.

    Without a subcommand (``gpu-health-evaluator --config x.yml``) ``default`` is used.
    """
    args = list(argv)
    parser = argparse.ArgumentParser(
        prog="gpu-health-evaluator",
        description="Scrape gpu-health exporters, store change-only samples, predict, alert.",
    )
    parser.add_argument("--version", action="version",
                        version=f"gpu-health-evaluator, version {__version__} "
                                f"(python {platform.python_version()})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (text, add_arguments) in COMMANDS.items():
        child = sub.add_parser(name, help=text, description=text)
        child.add_argument("--config", type=Path, default=None,
                           help="YAML config file (default: built-in defaults)")
        # The exporter-toolkit's names; the old --log-level is accepted and warned about.
        child.add_argument("--log.level", OLD_LOG_FLAG, dest="log_level", default="info",
                           help=f"{LEVEL_NAMES} (info)")
        child.add_argument("--log.format", dest="log_format", default="logfmt",
                           choices=FORMATS, help="logfmt (default) or json")
        add_arguments(child)
    if not args or (args[0].startswith("-") and args[0] not in ("-h", "--help", "--version")):
        args.insert(0, default)
    namespace = parser.parse_args(args)
    if level_number(namespace.log_level) is None:
        parser.error(f"--log.level: {namespace.log_level!r} is not one of {LEVEL_NAMES}")
    namespace.deprecated_flags = [a for a in args
                                  if a == OLD_LOG_FLAG or a.startswith(OLD_LOG_FLAG + "=")]
    return namespace


