"""One backtest run: check everything, import, replay every version, report.

Everything that can be wrong with the arguments (rule files, sweep values, the events file, the
``--plot`` dependency, the database path) is found before the database is created, and a failed
import removes the file it created: a bad input never leaves a half-filled backtest behind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from gpu_health.clock import Clock, system_clock
from gpu_health.errors import BacktestError, ConfigError
from gpu_health.evaluator.backtest.activity import tick_grid
from gpu_health.evaluator.backtest.compare import Costs
from gpu_health.evaluator.backtest.events import EventFile, iter_events, parse_events
from gpu_health.evaluator.backtest.events_import import Observation, write_events
from gpu_health.evaluator.backtest.inputs import EventsSource, events_info, prometheus_info
from gpu_health.evaluator.backtest.plot import plot_sweep, require_matplotlib
from gpu_health.evaluator.backtest.prometheus import PrometheusRange, import_prometheus
from gpu_health.evaluator.backtest.replay import ReplaySummary, replay
from gpu_health.evaluator.backtest.report import build_report, render_text
from gpu_health.evaluator.backtest.rulesets import Variant, baseline_variants, variants
from gpu_health.evaluator.config.rules import RULES_DIR, baseline_files
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest import (
    BACKTEST_FEATURE_TICKS,
    finish_run,
    imported_assumptions,
    imported_period,
    open_backtest,
    start_run,
)
from gpu_health.evaluator.store.history.backtest_import import sample_span
from gpu_health.evaluator.store.predictions.rule_versions import register_ruleset
from gpu_health.files import write_file

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BacktestOptions:
    db_path: Path
    live_paths: tuple[Path, ...]
    source: PrometheusRange | EventsSource | None
    rule_files: tuple[Path, ...]
    sweeps: tuple[tuple[str, list[str]], ...] = ()
    keepalive: timedelta = timedelta(minutes=5)
    output: Path | None = None
    plot: Path | None = None
    progress: bool | None = None  # None: a bar on a terminal only
    skip: bool = True
    baselines: bool = True  # replay rules/baselines/ beside the versions (docs/backtest.md)
    rules_dir: Path = RULES_DIR  # where rules/baselines/ is (the config's rules.dir)
    since: datetime | None = None  # replay only from here (events, --db); None: all of it
    until: datetime | None = None
    costs: Costs | None = None  # GPU-hours saved in the report (docs/calibration.md)


@dataclass(frozen=True, slots=True)
class Imported:
    """What the import wrote: the report's ``input`` section and the period to replay."""

    info: dict[str, Any]
    since: datetime
    until: datetime


def progress_bar(total: int, desc: str, progress: bool | None) -> tqdm[Any]:
    """A bar on stderr; ``progress=None``: only on a terminal (silent in logs and CI)."""
    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True,
                disable=None if progress is None else not progress)


def bar_callback(bar: tqdm[Any]) -> Callable[[int, int], None]:
    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)
    return update


@contextmanager
def backtest_file(options: BacktestOptions, found: Sequence[Variant], *,
                  clock: Clock = system_clock) -> Iterator[tuple[Database, int, Imported]]:
    """The backtest file with the history imported (or found there), a run recorded, and the
    period to replay (``--since``/``--until`` applied); closed on the way out. A failed import
    removes the file it created: nothing half-filled stays behind."""
    events = _read_events(options.source) if isinstance(options.source, EventsSource) else None
    created = not options.db_path.exists()
    db = open_backtest(options.db_path, live=options.live_paths,
                       importing=options.source is not None)
    closed = False
    try:
        run_id = start_run(db, now=clock(), kind=_kind(options.source),
                           source=_where(options.source), options=_options_json(options))
        try:
            imported = _clip(_import(db, options, found, events), options)
        except BaseException:
            if created:  # nothing of a failed import is worth keeping
                db.close()
                closed = True
                _remove(options.db_path)
            raise
        yield db, run_id, imported
    finally:
        if not closed:
            db.close()


def _clip(imported: Imported, options: BacktestOptions) -> Imported:
    """The part of the history ``--since``/``--until`` ask to replay (events, --db)."""
    since = max(imported.since, options.since or imported.since)
    until = min(imported.until, options.until or imported.until)
    if since >= until:
        raise ConfigError(f"--since/--until ({_iso(options.since)} .. {_iso(options.until)}) "
                          f"leave nothing of the history ({imported.since.isoformat()} .. "
                          f"{imported.until.isoformat()})")
    if (since, until) == (imported.since, imported.until):
        return imported
    return Imported({**imported.info, "replayed_period": {"since": since.isoformat(),
                                                           "until": until.isoformat()}},
                    since, until)


def _iso(at: datetime | None) -> str:
    return "start" if at is None else at.isoformat()


def run_backtest(options: BacktestOptions, *, clock: Clock = system_clock,
                 out: TextIO | None = None) -> dict[str, Any]:
    """Run everything; returns the report (also written to ``--output`` and printed)."""
    found = variants(options.rule_files, options.sweeps)
    yardsticks = baseline_variants(found, baseline_files(options.rules_dir)) \
        if options.baselines else []
    if options.plot is not None:
        require_matplotlib()
    with backtest_file(options, found, clock=clock) as (db, run_id, imported):
        summaries = replay_all(db, [v.ruleset for v in (*found, *yardsticks)], imported.since,
                               imported.until, skip=options.skip, progress=options.progress)
        report = build_report(db, found, summaries[:len(found)], input_info=imported.info,
                              since=imported.since, until=imported.until,
                              generated_at=clock(), database=str(options.db_path),
                              baselines=list(zip(yardsticks, summaries[len(found):],
                                                 strict=True)), costs=options.costs)
        finish_run(db, run_id, since=imported.since, until=imported.until, report=report)
    write_json(report, options.output)
    if options.plot is not None:
        plot_sweep(report, options.plot)
    (out or sys.stdout).write(render_text(report))
    return report


def write_json(report: dict[str, Any], output: Path | None) -> None:
    if output is not None:
        write_file(output, json.dumps(report, indent=2) + "\n", replace=True)


def _remove(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)


def _kind(source: object) -> str:
    return ("prometheus" if isinstance(source, PrometheusRange) else
            "events" if isinstance(source, EventsSource) else "replay")


def _where(source: object) -> str | None:
    if isinstance(source, PrometheusRange):
        return source.url
    return str(source.path) if isinstance(source, EventsSource) else None


def _options_json(options: BacktestOptions) -> dict[str, Any]:
    return {k: (asdict(v) if hasattr(v, "__dataclass_fields__") else v)
            for k, v in ((f, getattr(options, f)) for f in options.__dataclass_fields__)}


def _read_events(source: EventsSource) -> EventFile:
    try:
        with source.path.open(encoding="utf-8", newline="") as fh:
            return parse_events(fh, source.columns, str(source.path))
    except OSError as exc:
        raise ConfigError(f"--events {source.path}: cannot read: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--events {source.path}: not UTF-8 text: {exc}") from exc


def _import(db: Database, options: BacktestOptions, found: Sequence[Variant],
            events: EventFile | None) -> Imported:
    source = options.source
    if isinstance(source, EventsSource) and events is not None:
        return import_events(db, source, events, found, options)
    if isinstance(source, PrometheusRange):
        with progress_bar(0, "prometheus", options.progress) as bar:
            stats = asyncio.run(import_prometheus(db, source, options.keepalive, bar_callback(bar)))
        return Imported(prometheus_info(source, stats, db, options.keepalive),
                        source.since, source.until)
    period = imported_period(db)
    lo, hi, rows = sample_span(db)
    if period is None:
        if lo is None or hi is None:
            raise BacktestError(f"{options.db_path} holds no samples to replay")
        period = (lo, hi)
    info = imported_assumptions(db) or {"kind": "replay", "assumptions": []}
    summary = info.get("summary") or f"the {rows} samples already in {options.db_path}"
    return Imported({**info, "replayed_from": str(options.db_path), "summary": summary},
                    *period)


def import_events(db: Database, source: EventsSource, events: EventFile,
                  found: Sequence[Variant], options: BacktestOptions) -> Imported:
    """Read the checked file again, streaming it into the backtest file
    (:mod:`gpu_health.evaluator.backtest.events_import`)."""
    longest = max(v.ruleset.params.window_days for v in found)
    how = Observation(source.step, source.lead_in,
                      source.observe_after or timedelta(days=longest))
    origin = str(source.path)
    try:
        with source.path.open(encoding="utf-8", newline="") as fh, \
                progress_bar(0, "writing history", options.progress) as bar:
            written = write_events(db, iter_events(fh, source.columns, origin, events), events,
                                   how, keepalive=options.keepalive,
                                   progress=lambda n: bar.update(n - bar.n))
    except OSError as exc:
        raise ConfigError(f"--events {source.path}: cannot read: {exc}") from exc
    except ConfigError as exc:
        raise ConfigError([f"--events {source.path}: {p}" if not p.startswith(origin) else p
                           for p in exc.problems]) from None
    info = events_info(source, events, written, how.observe_after, options.keepalive)
    return Imported(info, written.since, written.until)


def replay_all(db: Database, rulesets: Sequence[RuleSet], since: datetime, until: datetime,
               *, skip: bool = True, progress: bool | None = None) -> list[ReplaySummary]:
    """Replay every rule set over ``[since, until]``, one after the other."""
    for rs in rulesets:  # a rule file changed under a used version fails here, before any work
        ticks = tick_grid(since, until, rs.params.scan_interval)
        if ticks:
            register_ruleset(db, rs, ticks[0])
    summaries = []
    for rs in rulesets:
        with progress_bar(0, f"replay {rs.version}", progress) as bar:
            summaries.append(replay(db, rs, since, until, skip=skip,
                                    chunk=BACKTEST_FEATURE_TICKS,
                                    progress=bar_callback(bar)))
    return summaries
