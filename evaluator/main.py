"""``gpu-health-evaluator`` entry point: a table of subcommands.

``run`` (the default when only options are given) scrapes, stores, predicts and serves the
API; ``simulate`` writes or purges simulated samples; ``tokens-hash`` prints the SHA-256 of an
API token read from stdin (for the tokens file). Adding a subcommand is one line in ``COMMANDS``:
``"demo": Command("help line", add_arguments, run)`` where ``run(args) -> exit code``.
Exit codes: 0 fine, 1 a runtime error (e.g. the database is locked), 2 bad config or arguments.
"""

from __future__ import annotations

import argparse
import logging
import sys

from aiohttp import web

from evaluator.backtest import cli as backtest_cli
from evaluator.demo import DEMO_COMMAND
from evaluator.settings import Config, load_config
from evaluator.settings_cli import (
    Command,
    environment,
    parse_args,
    simulate_arguments,
    simulate_options,
)
from gpu_health.errors import ConfigError, GpuHealthError

log = logging.getLogger("evaluator")


def _config(args: argparse.Namespace) -> Config:
    return load_config(args.config, environment())


def _no_arguments(_parser: argparse.ArgumentParser) -> None:
    return None


def cmd_run(args: argparse.Namespace) -> int:
    from evaluator.service import build_service

    config = _config(args)
    service = build_service(config, environment())
    web.run_app(service.web_app, host=config.listen_host, port=config.listen_port,
                access_log=None, print=None, handle_signals=True)
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from evaluator.ingest_simulated import run_simulation

    options = simulate_options(args, _config(args))
    written = run_simulation(options)
    if options.purge:
        print(f"purged {written['purged']} simulated sample rows from {options.storage_path}")
    else:
        parts = ", ".join(f"{profile} {n}" for profile, n in written.items())
        print(f"wrote {sum(written.values())} simulated rows to {options.storage_path} ({parts})")
    return 0


def cmd_tokens_hash(_args: argparse.Namespace) -> int:
    from evaluator.api.auth import tokens_hash_main

    return tokens_hash_main(sys.stdin, sys.stdout, sys.stderr)


COMMANDS: dict[str, Command] = {
    "run": Command("scrape, store change-only samples, predict, serve /metrics and the API "
                   "(default)",
                   _no_arguments, cmd_run),
    "simulate": Command("write source='simulated' samples for demo profiles, or --purge them",
                        simulate_arguments, cmd_simulate),
    "tokens-hash": Command("print the sha256 of an API token read from stdin (tokens file)",
                           _no_arguments, cmd_tokens_hash),
    "backtest": Command(backtest_cli.HELP, backtest_cli.add_arguments, backtest_cli.run),
    "demo": DEMO_COMMAND,
}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, COMMANDS)
    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command].run(args)
    except ConfigError as exc:
        print(f"gpu-health-evaluator: {exc}", file=sys.stderr)
        return 2
    except GpuHealthError as exc:
        print(f"gpu-health-evaluator: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
