"""``gpu-health-evaluator calibrate``: its options, validated into :class:`CalibrateOptions`.

The inputs, the period and the costs are the backtest's
(:mod:`gpu_health.evaluator.backtest.command`); every problem is listed at once, before any database
is created. The heavy modules load only when the subcommand runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gpu_health.clock import Clock, system_clock
from gpu_health.errors import ConfigError
from gpu_health.evaluator.backtest.command import cost_options, input_options, output_place
from gpu_health.evaluator.config.file import Config, load_config
from gpu_health.evaluator.config.storage import DEFAULT_STORAGE
from gpu_health.evaluator.config.values import Checker

if TYPE_CHECKING:
    from gpu_health.evaluator.calibrate.calibration_run import CalibrateOptions


def options_from(args: argparse.Namespace, config: Config, now: datetime) -> CalibrateOptions:
    """Validate the arguments; ConfigError lists every problem."""
    from gpu_health.evaluator.backtest.backtest_run import BacktestOptions
    from gpu_health.evaluator.calibrate.calibration_run import CalibrateOptions
    from gpu_health.evaluator.calibrate.choose import Objective
    from gpu_health.evaluator.calibrate.space import Space, parse_space
    from gpu_health.evaluator.store.history.backtest import default_path

    c = Checker()
    inputs = input_options(c, args, config, now)
    costs = cost_options(c, args)
    space: Space = []
    default = True
    try:
        space, default = parse_space(args.search)
    except ConfigError as exc:
        for problem in exc.problems:
            c.problem(problem)
    if not 0 < args.train_fraction < 1:
        c.problem(f"--train-fraction must be strictly between 0 and 1, got "
                  f"{args.train_fraction}")
    if not 0 <= args.min_precision <= 1:
        c.problem(f"--min-precision must be within 0..1, got {args.min_precision}")
    if args.min_test_faults < 1:
        c.problem(f"--min-test-faults must be at least 1, got {args.min_test_faults}")
    if args.objective == "cost" and costs is None:
        c.problem("--objective cost needs --cost-failure and --cost-mitigation")
    output_place(c, args.write_rule, "--write-rule", folder=True)
    base = args.rules or config.rules.dir / f"{config.rules.active}.yaml"
    if not base.is_file():
        c.problem(f"--rules: no rule file {base}")
    c.raise_if_any()
    bt = BacktestOptions(
        db_path=args.db or default_path(now), live_paths=(config.storage.path, DEFAULT_STORAGE),
        source=inputs.source, rule_files=(base,),
        keepalive=config.keepalive, output=args.output,
        progress=args.progress, rules_dir=config.rules.dir, since=inputs.since,
        until=inputs.until, costs=costs)
    return CalibrateOptions(
        backtest=bt, space=space, default_space=default, train_fraction=args.train_fraction,
        objective=Objective(args.objective, args.min_precision),
        min_test_faults=args.min_test_faults, write_rule=args.write_rule)


def run(args: argparse.Namespace, environ: Mapping[str, str],
        clock: Clock = system_clock) -> int:
    """The subcommand: 0 when the report was written, whatever the verdict."""
    from gpu_health.evaluator.calibrate.calibration_run import run_calibrate

    config = load_config(args.config, environ)
    run_calibrate(options_from(args, config, clock().astimezone(UTC)), clock=clock)
    return 0
