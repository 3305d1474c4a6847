"""Rewrite a stopped evaluator's DuckDB file to its live data (``gpu-health-evaluator compact``).

DuckDB reuses the blocks freed by a dropped index or deleted rows but never gives them back to
the disk: after migration 5 dropped the samples' ART index (about 90% of an older file) the file
keeps its size until it is rewritten. This copies every table, index and row into a new file
beside it (``COPY FROM DATABASE``) and renames it over the old one, so a crash at any point
leaves the old file whole.

The evaluator must be stopped: opening the file read-write first both checkpoints its WAL (a WAL
left beside the new file would be replayed into it) and fails cleanly when another process holds
the file.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from gpu_health.errors import StoreError


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def compact(path: Path) -> tuple[int, int]:
    """Rewrite ``path`` in place; return its size before and after, in bytes."""
    if not path.is_file():
        raise StoreError(f"{path}: no such database file", reason="open")
    try:
        with duckdb.connect(str(path)) as con:  # fails while an evaluator holds the file
            con.execute("CHECKPOINT")
    except duckdb.Error as exc:
        raise StoreError(f"cannot open {path} (stop the evaluator first): {exc}",
                         reason="open") from exc
    before = path.stat().st_size
    tmp = path.with_name(path.name + ".compact")
    tmp.unlink(missing_ok=True)
    try:
        with duckdb.connect(str(tmp)) as con:
            target = con.execute("SELECT current_database()").fetchone()
            con.execute(f"ATTACH {_quote(path)} AS compact_source (READ_ONLY)")
            con.execute(f'COPY FROM DATABASE compact_source TO "{target[0] if target else ""}"')
            con.execute("DETACH compact_source")
            con.execute("CHECKPOINT")
    except duckdb.Error as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"compacting {path} failed, the file is unchanged: {exc}",
                         reason="query") from exc
    tmp.replace(path)  # atomic on one file system: the old file or the new, never half
    return before, path.stat().st_size
