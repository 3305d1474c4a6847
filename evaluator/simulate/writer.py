"""``gpu-health-evaluator simulate``: write simulated samples, or purge them.

Samples come from the pure generators in ``gpu_health.evaluator.simulate.profiles`` and pass through
the production write rule (change-only + keepalive) before insertion, so the rows look exactly like
what the scrape loop would have stored. Everything is written with ``source='simulated'`` in one
transaction (an interrupted run leaves nothing behind); nodes are ``<prefix><profile>``. A run
refuses to add to nodes that already hold simulated samples (``--purge`` first), and ``--purge``
deletes only simulated rows. DuckDB allows one writing process per file: stop a running
evaluator on the same file first (the error says so).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path

from tqdm import tqdm

from gpu_health.clock import Clock, system_clock
from gpu_health.contract import SOURCE_SIMULATED
from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.writes import DEFAULT_KEEPALIVE
from gpu_health.evaluator.model import CardKey, Sample
from gpu_health.evaluator.simulate.options import SimulateOptions
from gpu_health.evaluator.simulate.profiles import change_only, readings, steps_between
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.maintenance import purge_simulated, simulated_nodes_present
from gpu_health.evaluator.store.readings.samples import insert_samples

log = logging.getLogger(__name__)

BATCH_ROWS = 50_000


def run_simulation(options: SimulateOptions, *, clock: Clock = system_clock,
                   progress: bool | None = None) -> Counter[str]:
    """Write (or purge) simulated samples; returns rows written per profile (``purged`` key)."""
    db = DuckDBDatabase(options.storage_path)
    try:
        if options.purge:
            return Counter(purged=purge_simulated(db))
        return _write(db, options, clock, progress)
    finally:
        db.close()


def _write(db: Database, options: SimulateOptions, clock: Clock,
           progress: bool | None) -> Counter[str]:
    nodes = {profile: options.node_prefix + profile for profile in options.profiles}
    present = simulated_nodes_present(db, list(nodes.values()))
    if present:
        raise ConfigError(
            f"simulated samples already exist for {', '.join(present)}; run "
            "`gpu-health-evaluator simulate --purge` first (it deletes only simulated rows)"
        )
    end = options.end or clock()
    start = end - timedelta(days=options.days)
    step = timedelta(seconds=options.step_seconds)
    keepalive = options.keepalive
    total = steps_between(start, end, step) * options.cards * len(nodes)
    written: Counter[str] = Counter()
    batch: list[Sample] = []
    # disable=None: a bar on a terminal, silence in logs and CI.
    bar = tqdm(total=total, unit="reading", unit_scale=True, desc="simulating",
               disable=None if progress is None else not progress)
    with bar, db.transaction():
        for profile, node in nodes.items():
            for gpu in range(options.cards):
                key = CardKey(node, gpu, SOURCE_SIMULATED)
                stream = readings(profile, key, start, end, step, options.seed)
                for row in change_only(_counted(stream, bar), keepalive):
                    batch.append(row)
                    written[profile] += 1
                    if len(batch) >= BATCH_ROWS:
                        insert_samples(db, batch)
                        batch.clear()
        insert_samples(db, batch)
    log.info("simulated %d rows for %d nodes x %d cards over %.1f days ending %s",
             sum(written.values()), len(nodes), options.cards, options.days, end.isoformat())
    return written


def write_series(storage_path: Path, stream: Iterable[Sample],
                 keepalive: timedelta = DEFAULT_KEEPALIVE) -> int:
    """Write one simulated card's readings through the write rule, in one transaction; returns
    the rows written. Refuses a reading that is not simulated (never mixed with real data)."""
    db = DuckDBDatabase(storage_path)
    try:
        rows = list(change_only(stream, keepalive))
        if any(r.key.source != SOURCE_SIMULATED for r in rows):
            raise ConfigError("write_series writes simulated readings only")
        with db.transaction():
            insert_samples(db, rows)
        return len(rows)
    finally:
        db.close()


def _counted(stream: Iterable[Sample], bar: tqdm[None]) -> Iterator[Sample]:
    """Advance the progress bar every 1000 readings (per-item updates would dominate)."""
    n = 0
    for sample in stream:
        n += 1
        if n == 1000:
            bar.update(n)
            n = 0
        yield sample
    bar.update(n)
