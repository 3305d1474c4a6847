"""``gpu-health-evaluator backtest``: its options and the step from parsed arguments to a run.

argv is parsed by :func:`gpu_health.evaluator.cli.parse_args` (which declares the options);
:func:`options_from` turns the namespace (plus the evaluator config: scrape interval, keep-alive,
rules folder, the live database path) into validated
:class:`~gpu_health.evaluator.backtest.backtest_run.BacktestOptions`, listing every problem at
once. The heavy modules (DuckDB, aiohttp, tqdm) load only when the subcommand runs:
``gpu_health.evaluator.main`` imports this module for every command line.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from gpu_health.clock import Clock, system_clock
from gpu_health.errors import ConfigError
from gpu_health.evaluator.backtest.compare import Costs
from gpu_health.evaluator.backtest.events import PRESETS, EventColumns, parse_time
from gpu_health.evaluator.config.file import Config, load_config
from gpu_health.evaluator.config.storage import DEFAULT_STORAGE
from gpu_health.evaluator.config.values import Checker, url_problem
from gpu_health.evaluator.ingest.prometheus.metricsets import LIMIT_POINTS, METRIC_SETS
from gpu_health.files import not_a_folder

if TYPE_CHECKING:
    from gpu_health.evaluator.backtest.backtest_run import BacktestOptions
    from gpu_health.evaluator.backtest.inputs import EventsSource
    from gpu_health.evaluator.backtest.prometheus import PrometheusRange

def _duration(c: Checker, value: str | None, flag: str, default: timedelta) -> timedelta:
    return timedelta(seconds=c.duration({flag: value}, flag, flag, default.total_seconds()))


def _time(c: Checker, value: str | None, flag: str) -> datetime | None:
    if value is None:
        return None
    at = parse_time(value)
    if at is None:
        c.problem(f"{flag} {value!r} is neither ISO 8601 with a zone nor Unix seconds")
    return at


def _split(text: str | None) -> frozenset[str]:
    return frozenset(t.strip() for t in (text or "").split(",") if t.strip())


def _columns(c: Checker, args: argparse.Namespace) -> EventColumns | None:
    base = PRESETS.get(args.preset) if args.preset else None
    named = tuple(dict.fromkeys(t.strip() for t in (args.node_columns or "").split(",")
                                if t.strip()))
    node = named or (base.node if base else ())
    values = {
        "gpu": args.gpu_column or (base.gpu if base else None),
        "time": args.time_column or (base.time if base else None),
        "type": args.type_column or (base.type if base else None),
    }
    correct = _split(args.correctable) or (base.correctable if base else frozenset())
    uncorrect = _split(args.uncorrectable) or (base.uncorrectable if base else frozenset())
    missing = [flag for flag, v in (("--node-columns", node), ("--gpu-column", values["gpu"]),
                                    ("--time-column", values["time"]),
                                    ("--type-column", values["type"]),
                                    ("--correctable", correct), ("--uncorrectable", uncorrect))
               if not v]
    if missing:
        c.problem(f"--events needs --preset or {', '.join(missing)}")
        return None
    if correct & uncorrect:
        both = ", ".join(sorted(correct & uncorrect))
        c.problem(f"types both correctable and uncorrectable: {both}")
    return EventColumns(node, str(values["gpu"]), str(values["time"]), str(values["type"]),
                        correct, uncorrect, _split(args.ignore_types))


@dataclass(frozen=True, slots=True)
class Inputs:
    """Where the history comes from and which part of it is replayed."""

    source: PrometheusRange | EventsSource | None  # None: the samples of --db
    since: datetime | None  # replay from (events, --db); None: the history's start
    until: datetime | None  # replay to; None: the history's end


def input_options(c: Checker, args: argparse.Namespace, config: Config,
                  now: datetime) -> Inputs:
    """--prometheus / --events / --db and --since/--until (problems go to ``c``)."""
    from gpu_health.evaluator.backtest.inputs import EventsSource

    step = _duration(c, args.step, "--step", timedelta(seconds=config.scrape.interval))
    source: PrometheusRange | EventsSource | None = None
    if args.prometheus is not None:
        source = _prometheus(c, args, step, now)
    stray = [flag for flag, value in (("--preset", args.preset),
                                      ("--node-columns", args.node_columns),
                                      ("--gpu-column", args.gpu_column),
                                      ("--lead-in", args.lead_in),
                                      ("--observe-after", args.observe_after)) if value]
    if stray and args.events is None:
        c.problem(f"{', '.join(stray)} only apply to --events")
    if args.events is not None:
        columns = _columns(c, args)
        lead_in = _duration(c, args.lead_in, "--lead-in", step)
        after = _duration(c, args.observe_after, "--observe-after", timedelta(0)) or None
        if columns is not None:
            source = EventsSource(args.events, columns, args.preset, step, lead_in, after)
    output_place(c, args.output, "--output")
    if args.prometheus is not None:
        return Inputs(source, None, None)  # the import's own period is the replayed one
    since, until = _time(c, args.since, "--since"), _time(c, args.until, "--until")
    if since is not None and until is not None and since >= until:
        c.problem(f"--since ({since.isoformat()}) must be before --until ({until.isoformat()})")
    return Inputs(source, since, until)


def output_place(c: Checker, path: Path | None, flag: str, *, folder: bool = False) -> None:
    """A place the run will write to, checked before the run spends its time: a folder that
    is a file (or a file that is a folder) is a problem listed now, not a traceback later."""
    if path is None:
        return
    if not folder and path.is_dir():
        c.problem(f"{flag}: {path} is a folder, not a file")
    blocker = not_a_folder(path if folder else path.parent)
    if blocker is not None:
        c.problem(f"{flag}: {blocker} is not a folder")


def cost_options(c: Checker, args: argparse.Namespace) -> Costs | None:
    """--cost-failure and --cost-mitigation (both or neither), --mitigation-time."""
    given = {f: v for f, v in (("--cost-failure", args.cost_failure),
                               ("--cost-mitigation", args.cost_mitigation)) if v is not None}
    for flag, value in given.items():
        if not math.isfinite(value) or value < 0:
            c.problem(f"{flag} must be a finite number of GPU-hours >= 0, got {value}")
    mitigation_time = _duration(c, args.mitigation_time, "--mitigation-time", timedelta(0))
    if len(given) == 1:
        c.problem(f"{next(iter(given))} needs "
                  f"{'--cost-mitigation' if '--cost-failure' in given else '--cost-failure'} "
                  "too (the saving is one minus the other)")
        return None
    if args.mitigation_time is not None and not given:
        c.problem("--mitigation-time only applies with --cost-failure and --cost-mitigation")
    if len(given) < 2:
        return None
    return Costs(args.cost_failure, args.cost_mitigation, mitigation_time)


def options_from(args: argparse.Namespace, config: Config, now: datetime) -> BacktestOptions:
    """Validate the arguments; ConfigError lists every problem."""
    from gpu_health.evaluator.backtest.backtest_run import BacktestOptions
    from gpu_health.evaluator.backtest.rulesets import parse_sweeps
    from gpu_health.evaluator.store.history.backtest import default_path

    c = Checker()
    inputs = input_options(c, args, config, now)
    costs = cost_options(c, args)
    sweeps: list[tuple[str, list[str]]] = []
    try:
        sweeps = parse_sweeps(args.sweep)
    except ConfigError as exc:
        for problem in exc.problems:
            c.problem(problem)
    c.raise_if_any()
    rules = tuple(args.rules or (config.rules.dir / f"{config.rules.active}.yaml",))
    return BacktestOptions(
        db_path=args.db or default_path(now),
        live_paths=(config.storage.path, DEFAULT_STORAGE),
        source=inputs.source, rule_files=rules, sweeps=tuple(sweeps),
        keepalive=config.keepalive,
        output=args.output, plot=args.plot, progress=args.progress, skip=not args.every_tick,
        baselines=args.baselines, rules_dir=config.rules.dir,
        since=inputs.since, until=inputs.until, costs=costs,
    )


def _prometheus(c: Checker, args: argparse.Namespace, step: timedelta,
                now: datetime) -> PrometheusRange | None:
    from gpu_health.evaluator.backtest.prometheus import PrometheusRange, aligned

    problem = url_problem(args.prometheus)
    if problem:
        c.problem(f"--prometheus: {problem}")
    since = _time(c, args.since, "--since")
    until = _time(c, args.until, "--until") or now
    if args.since is None:
        c.problem("--prometheus needs --since (the start of the history to import)")
    if since is not None and since >= until:
        c.problem(f"--since ({since.isoformat()}) must be before --until ({until.isoformat()})")
    if not 1 <= args.max_points <= LIMIT_POINTS:
        c.problem(f"--max-points must be in 1..{LIMIT_POINTS}, got {args.max_points}")
    timeout = _duration(c, args.timeout, "--timeout", timedelta(seconds=120))
    if problem or since is None or since >= until:
        return None
    return PrometheusRange(
        url=args.prometheus, metrics=METRIC_SETS[args.metrics], since=aligned(since, step),
        until=until, step=step, node_label=args.node_label, selector=args.selector,
        timeout=timeout.total_seconds(), max_points=args.max_points,
    )


def run(args: argparse.Namespace, environ: Mapping[str, str],
        clock: Clock = system_clock) -> int:
    """The subcommand: 0 when the report was written."""
    from gpu_health.evaluator.backtest.backtest_run import run_backtest

    config = load_config(args.config, environ)
    run_backtest(options_from(args, config, clock().astimezone(UTC)), clock=clock)
    return 0
