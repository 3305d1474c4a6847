"""``gpu-health-evaluator`` entry point: reads argv and the environment once, runs a subcommand.

``run`` (the default when only options are given) scrapes, stores, predicts and serves the
API; ``simulate`` writes or purges simulated samples; ``tokens-hash`` prints the SHA-256 of an
API token read from stdin (for the tokens file); ``backtest`` replays history; ``calibrate``
finds a better rule version and proves it on data it was not tuned on; ``demo`` runs the
whole product on one machine; ``compact`` rewrites a stopped evaluator's file to its live data.
Arguments are declared in :mod:`gpu_health.evaluator.cli`; ``RUNNERS`` maps
the same names to ``run(args, environ) -> exit code``. Nothing below ``main`` reads
``os.environ``: the mapping read here is passed down.
Exit codes: 0 fine, 1 a runtime error (e.g. the database is locked), 2 bad config or arguments.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import Final

from gpu_health.errors import ConfigError, GpuHealthError
from gpu_health.evaluator.cli import parse_args
from gpu_health.evaluator.config.file import Config, load_config
from gpu_health.evaluator.ingest import collector_thresholds
from gpu_health.logformat import formatter, level_number
from gpu_health.webguard import WebGuard

log = logging.getLogger("evaluator")

Runner = Callable[[argparse.Namespace, Mapping[str, str]], int]


def _config(args: argparse.Namespace, environ: Mapping[str, str]) -> Config:
    return load_config(args.config, environ)


def cmd_run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from gpu_health.evaluator.compose import build_service
    from gpu_health.evaluator.http.server import bind, serve

    config = _config(args, environ)
    guard = None if args.web_config is None else WebGuard(args.web_config)  # bad: exit 2
    collector_thresholds.apply()  # a long-running process holding millions of objects
    # a taken port fails before anything starts
    sock = bind(config.web.listen_host, config.web.listen_port)
    try:
        service = build_service(config, environ, guard=guard)
    except BaseException:
        sock.close()
        raise
    serve(service.web_app, sock, guard, hangup=service.hangup)
    return 0


def _duckdb_only(command: str, config: Config, explicit: object, why: str) -> None:
    """Refuse a DuckDB-only command on a PostgreSQL config unless a file was named: it would
    otherwise work on the default DuckDB file, silently not on the configured store."""
    if config.storage.postgres is not None and explicit is None:
        raise ConfigError(f"{command} works on a DuckDB file and this config's store is "
                          f"PostgreSQL (storage.url): {why}")


def cmd_simulate(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from gpu_health.evaluator.simulate.options import simulate_options
    from gpu_health.evaluator.simulate.writer import run_simulation

    config = _config(args, environ)
    _duckdb_only("simulate", config, args.storage, "pass --storage FILE to write a separate "
                 "demo file (simulated rows never belong in a shared production store)")
    options = simulate_options(args, config)
    written = run_simulation(options)
    if options.purge:
        print(f"purged {written['purged']} simulated sample rows from {options.storage_path}")
    else:
        parts = ", ".join(f"{profile} {n}" for profile, n in written.items())
        print(f"wrote {sum(written.values())} simulated rows to {options.storage_path} ({parts})")
    return 0


def cmd_tokens_hash(_args: argparse.Namespace, _environ: Mapping[str, str]) -> int:
    from gpu_health.evaluator.http.api.auth import tokens_hash_main

    return tokens_hash_main(sys.stdin, sys.stdout, sys.stderr)


def cmd_backtest(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from gpu_health.evaluator.backtest.command import run

    return run(args, environ)


def cmd_calibrate(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from gpu_health.evaluator.calibrate.command import run

    return run(args, environ)


def cmd_demo(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from gpu_health.evaluator.demo import run_demo

    collector_thresholds.apply()  # as ``run`` does: the demo is the whole product
    return run_demo(args, environ)


def cmd_check(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from gpu_health.evaluator.check import check_main

    return check_main(args, sys.stdout, node_name=environ.get("NODE_NAME"))


def cmd_compact(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from gpu_health.evaluator.store.engines.duckdb_compact import compact

    config = _config(args, environ)
    _duckdb_only("compact", config, args.storage, "PostgreSQL gives space back with VACUUM "
                 "(FULL), not with this command")
    path = args.storage or config.storage.path
    before, after = compact(path)
    print(f"compacted {path}: {before / 1e6:,.1f} MB -> {after / 1e6:,.1f} MB")
    return 0


RUNNERS: Final[dict[str, Runner]] = {
    "run": cmd_run,
    "simulate": cmd_simulate,
    "tokens-hash": cmd_tokens_hash,
    "backtest": cmd_backtest,
    "calibrate": cmd_calibrate,
    "demo": cmd_demo,
    "compact": cmd_compact,
    "check": cmd_check,
}
# Nagios codes: a check that cannot run is UNKNOWN (3), never CRITICAL (2, argparse's usage
# code), which a Slurm health check would turn into a drain. node-problem-detector's unknown
# is 2 (its "problem" is 1).
NAGIOS_UNKNOWN: Final = 3
NPD_UNKNOWN: Final = 2


def _check_unknown(raw: list[str]) -> int:
    """The "cannot tell" exit code of ``check`` in the protocol its arguments asked for."""
    npd = "node-problem-detector" in raw and any(a.startswith("--format") for a in raw)
    return NPD_UNKNOWN if npd else NAGIOS_UNKNOWN


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ) if environ is None else environ  # the one read of the environment
    raw = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(raw)
    except SystemExit as exc:
        if exc.code == 2 and raw[:1] == ["check"]:
            return _check_unknown(raw)
        raise
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(args.log_format))
    logging.basicConfig(level=level_number(args.log_level), handlers=[handler])
    if args.deprecated_flags:
        log.warning("--log-level is deprecated and will be removed: use --log.level")
    try:
        return RUNNERS[args.command](args, env)
    except ConfigError as exc:
        print(f"gpu-health-evaluator: {exc}", file=sys.stderr)
        return 2
    except GpuHealthError as exc:
        print(f"gpu-health-evaluator: {exc}", file=sys.stderr)
        return _check_unknown(raw) if args.command == "check" else 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
