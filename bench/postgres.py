"""Benchmark: the PostgreSQL store beside DuckDB on the same data.

For each fleet (4,096 and 16,384 cards x 37 days of 5-minute rows, ``bench.rules``'s profiles,
400 planted pending predictions, XID rows), the fleet is generated and summarised in DuckDB (not
timed), then copied table by table into a throwaway PostgreSQL cluster (Debian's server, started
by the bench like the tests do; CSV written by DuckDB, ``COPY ... FROM`` by the server, indexes
built after the load, ``ANALYZE``; not timed). Then, on each engine: a worker tick (backfill +
predict) on a fresh connection, the next tick, a tick by a new worker on another fresh
connection (a new leader after a failover), prediction-stats twice. Printed: seconds per engine
and the PostgreSQL / DuckDB ratio (target: <= 3x).

The first tick after the load is printed but not held to the target: it fills the caches, and
on PostgreSQL a fleet's database larger than the machine's memory (16,384 cards: ~25 GB) makes it
read every probed index page from disk. A PostgreSQL server pays that after its own restart, not
after an evaluator's (the cache is the server's); the new-worker tick measures the latter.

The cluster runs with ``shared_buffers`` at 25% of the machine's memory, PostgreSQL's documented
starting point for a dedicated server (``--shared-buffers``; ``default`` keeps the 128 MB
default, with which the 16,384-card tick's index pages no longer stay in the cache).
Both engines seal their rollups hourly (``Database.seal_every``); the bench seals the last day
of both stores that way after the copy and prints what that costs (the worker pays it once an
hour).

    python -m bench.postgres                 # 4,096 and 16,384 cards x 37 days (~45 min)
    python -m bench.postgres --cards 4096    # one fleet
    python -m bench.postgres --quick         # 256 cards x 10 days
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from bench.rules import END, generate, plant_predictions, summarise
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.stats.document import prediction_stats
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.engines.postgres import PostgresDatabase
from gpu_health.evaluator.store.readings.rollups import GRACE, day_floor, seal
from gpu_health.evaluator.worker import Worker
from tests.postgres import postgres_server

NOW = END - timedelta(minutes=1)  # as bench.scale
TABLES = ("gpu_health_rule_versions", "gpu_health_predictions", "gpu_health_samples",
          "gpu_health_xid_samples", "gpu_health_sample_days", "gpu_health_window_edges",
          "gpu_health_rollup_state", "gpu_health_nodes")
# PostgreSQL's indexes of migration 6, dropped for the load and built after it
PG_INDEXES = ("idx_samples_card_time", "idx_samples_time", "idx_xid_samples_series",
              "idx_sample_days_card", "idx_sample_days_day", "idx_window_edges",
              "idx_predictions_window")


def build_duckdb(path: Path, cards: int, days: int) -> int:
    db = DuckDBDatabase(path)
    rows, _ = generate(db, cards, days, END)
    ruleset = load_ruleset(env={})
    plant_predictions(db, ruleset.version, cards, NOW)
    Worker(db, ruleset, clock=lambda: NOW).register(NOW)
    summarise(db, day_floor(NOW) + GRACE)  # the whole days; the last day's hours on each engine
    db.close()
    return rows


def copy_to_postgres(duck_path: Path, pg: PostgresDatabase, folder: Path) -> None:
    """Every table's rows, DuckDB -> CSV -> PostgreSQL's COPY (the server reads the file)."""
    duck = DuckDBDatabase(duck_path, read_only=True)
    indexes = {name: pg.fetchone("SELECT indexdef FROM pg_indexes WHERE indexname = $name",
                                 {"name": name})[0] for name in PG_INDEXES}
    for name in PG_INDEXES:
        pg.execute(f"DROP INDEX {name}")
    folder.chmod(0o755)
    for table in TABLES:
        columns = [r[0] for r in duck.fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_name = $table "
            "ORDER BY ordinal_position", {"table": table})]
        # PostgreSQL's array literal for the hourly counts ({1,2}), DuckDB's list ([1, 2])
        select = ", ".join(f"'{{' || array_to_string({c}, ',') || '}}'" if c == "corr_hours"
                           else c for c in columns)
        csv = folder / f"{table}.csv"
        duck.execute(f"COPY (SELECT {select} FROM {table}) TO '{csv}' (HEADER false)")
        csv.chmod(0o644)
        pg.execute(f"DELETE FROM {table}")
        pg.execute(f"COPY {table} ({', '.join(columns)}) FROM '{csv}' WITH (FORMAT csv)")
        csv.unlink()
    duck.close()
    for sql in indexes.values():
        pg.execute(sql)
    pg.execute("VACUUM (ANALYZE)")  # hint bits and statistics, as autovacuum would leave them


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def measure(open_db: Callable[[], Database]) -> dict[str, Any]:
    """On a fresh connection: the first worker tick after the load (it backfills the planted
    windows and predicts), the next tick (every card's features again: what each minute
    costs); then a new worker on another fresh connection ticks (a new leader), and
    prediction-stats runs twice (cold, then warm caches)."""
    ruleset = load_ruleset(env={})
    db = open_db()
    worker = Worker(db, ruleset, clock=lambda: NOW)
    out: dict[str, Any] = {"tick_first": timed(lambda: worker.tick(NOW)),
           "tick_next": timed(lambda: worker.tick(NOW + timedelta(minutes=1)))}
    db.close()
    db = open_db()
    leader = Worker(db, ruleset, clock=lambda: NOW + timedelta(minutes=2))
    out["tick_new_leader"] = timed(lambda: leader.tick(NOW + timedelta(minutes=2)))
    for run in ("stats_cold", "stats_warm"):
        out[run] = timed(lambda: prediction_stats(db, now=NOW, ruleset=ruleset))
    out["stats_statements"] = statement_times(
        db, lambda: prediction_stats(db, now=NOW, ruleset=ruleset))
    db.close()
    return out


def statement_times(db: Database, fn: Callable[[], object]) -> list[tuple[float, str]]:
    """Run ``fn`` once more, timing each statement it sends (and reads back) through
    ``db.execute``: where an engine's statistics spend their time, slowest first."""
    spent: list[tuple[float, str]] = []
    execute = db.execute

    def timed_execute(sql: str, params: object = None) -> object:
        started = time.perf_counter()
        cursor = execute(sql, params)  # type: ignore[arg-type]
        rows = cursor.fetchall()
        spent.append((time.perf_counter() - started, " ".join(sql.split())[:90]))
        return _Rows(rows)

    db.execute = timed_execute  # type: ignore[method-assign]
    try:
        fn()
    finally:
        del db.execute  # the class's method again
    return sorted(spent, reverse=True)


class _Rows:
    """A fetched result that answers like a cursor."""

    def __init__(self, rows: list[object]) -> None:
        self.rows = rows

    def fetchall(self) -> list[object]:
        return self.rows

    def fetchone(self) -> object:
        return self.rows[0] if self.rows else None


def default_shared_buffers() -> str:
    """25% of this machine's memory, in megabytes."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{memory // 4 // 2**20}MB"


def one_fleet(cards: int, days: int, tmp: Path, settings: dict[str, str]) -> bool:
    duck_path = tmp / f"fleet-{cards}.duckdb"
    started = time.perf_counter()
    rows = build_duckdb(duck_path, cards, days)
    print(f"\n{cards:,} cards x {days} days: {rows:,} rows, DuckDB built in "
          f"{time.perf_counter() - started:.0f} s (not timed)", flush=True)
    with postgres_server(settings) as server:
        url = server.url(server.new_database())
        pg = PostgresDatabase(url, statement_timeout_s=3600)  # the load, not a tick
        started = time.perf_counter()
        copy_to_postgres(duck_path, pg, tmp)
        print(f"  copied into PostgreSQL in {time.perf_counter() - started:.0f} s (not timed)",
              flush=True)
        # Both engines seal hourly: the hours of the last day, then one more, as the worker
        # does once an hour (neither is part of the ticks below)
        duck = DuckDBDatabase(duck_path)
        engines: tuple[tuple[str, Database], ...] = (("DuckDB", duck), ("PostgreSQL", pg))
        for name, db in engines:
            day = timed(partial(seal, db, NOW - timedelta(hours=1)))
            hour = timed(partial(seal, db, NOW))
            print(f"  {name} hourly sealing: the day's first 22 h {day:.2f} s, the next hour "
                  f"{hour:.2f} s (once an hour, in the worker)", flush=True)
        duck.close()
        pg.execute("ANALYZE")
        pg.close()
        results = {"duckdb": measure(lambda: DuckDBDatabase(duck_path)),
                   "postgresql": measure(lambda: PostgresDatabase(url))}
    ok = True
    for name, key in (("DuckDB", "duckdb"), ("PostgreSQL", "postgresql")):
        slowest = results[key].pop("stats_statements")
        total = sum(t for t, _ in slowest)
        print(f"  {name} statistics, {len(slowest)} statements, {total:.2f} s in them; "
              "slowest: " + "; ".join(f"{t:.3f} s {sql}" for t, sql in slowest[:3]),
              flush=True)
    for key in ("tick_first", "tick_next", "tick_new_leader", "stats_cold", "stats_warm"):
        d, p = results["duckdb"][key], results["postgresql"][key]
        ratio = p / d if d else float("inf")
        held = key != "tick_first"  # cache filling after the load (module docstring)
        ok = ok and (ratio <= 3.0 or not held)
        print(f"  {key:<15} DuckDB {d:7.2f} s   PostgreSQL {p:7.2f} s   ratio {ratio:5.2f}x"
              f"{'' if held else '   (after the load: caches cold; not held to 3x)'}",
              flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="256 cards x 10 days")
    parser.add_argument("--cards", type=int, action="append")
    parser.add_argument("--days", type=int, default=37)
    parser.add_argument("--shared-buffers", default=default_shared_buffers(),
                        help="the cluster's shared_buffers (default: 25%% of memory, "
                             "%(default)s here); 'default': PostgreSQL's own")
    args = parser.parse_args(argv)
    settings = {} if args.shared_buffers == "default" else {
        "shared_buffers": args.shared_buffers}
    print(f"PostgreSQL shared_buffers: {args.shared_buffers}", flush=True)
    logging.basicConfig(level=logging.WARNING)
    fleets = [(256, 10)] if args.quick else [(c, args.days) for c in args.cards or (4096, 16384)]
    with tempfile.TemporaryDirectory(prefix="gpu-health-bench-pg-",
                                     dir=os.environ.get("TMPDIR")) as tmp:
        # every fleet, even after one misses
        results = [one_fleet(cards, days, Path(tmp), settings) for cards, days in fleets]
    ok = all(results)
    print("target met: PostgreSQL within 3x of DuckDB" if ok else "TARGET MISSED (3x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
